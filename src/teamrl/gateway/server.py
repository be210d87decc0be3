"""The HTTP server: OpenAI Chat Completions over teamrl's policies, one route per agent name.

    POST /v1/chat/completions                      (the run's token)
    GET  /v1/models
    POST /episodes/<id>/v1/chat/completions        (that episode's own key: its calls are recorded)
    GET  /episodes/<id>/v1/models

The `model` field, or an `X-Teamrl-Agent` header, names the agent; the agent's policy (the run's
agent -> policy mapping) answers. teamrl renders the messages with the policy's own chat template
(`Policy.encode_prompt`), so the token ids it trains are the ids it sampled from. Handlers never touch
a model: they hand prompts to the `SamplingWorker` thread and await its futures.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import secrets
import socket
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future
from dataclasses import dataclass

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from teamrl.gateway.batching import SamplingWorker
from teamrl.gateway.http_request import ClientGone, read_chat_request, unless_disconnected
from teamrl.gateway.openai_api import (
    Answer,
    ApiError,
    ChatRequest,
    ChunkWriter,
    completion_body,
    error_body,
    models_body,
    plain_messages,
    stream_events,
    token_logprobs,
)
from teamrl.gateway.parameters import (
    MIN_TEMPERATURE,
    MIN_TOP_P,
)
from teamrl.gateway.sessions import Call, EpisodeSession, SessionTable
from teamrl.gateway.streaming import StreamText, TokenFeed, without_stop
from teamrl.gateway.tool_calls import ToolRequest, read_answer, tool_call_parser, tool_request
from teamrl.gateway.tool_prompt import prompt_messages, template_supports_tools
from teamrl.policies.loading import Policy
from teamrl.rollout.builtin_engine import Generation, SamplingParams
from teamrl.rollout.engine_routing import context_length

log = logging.getLogger("teamrl.gateway")

Responder = Callable[[str, list[dict]], str]
"""(agent, chat messages) -> the agent's answer: a scripted teammate."""


@dataclass
class AgentRoute:
    """Who answers an agent name, and with which settings."""

    policy: Policy
    params: SamplingParams  # the agent's configured sampling; max_new_tokens caps a request's max_tokens
    request_sampling: bool = False  # honour the request's temperature / top_p (serving, not training:
    # the trained log-probs must come from the configured temperature)
    tool_parser: str = "hermes"  # reads tool calls out of the sampled text (`tool_calls.TOOL_CALL_PARSERS`)

    def __post_init__(self) -> None:
        tool_call_parser(self.tool_parser)  # an unknown name fails here, listing the registered ones


@dataclass(frozen=True)
class GatewayLimits:
    """What one request may ask for."""

    max_message_chars: int = 200_000  # all messages' text together
    max_body_bytes: int = 2_000_000


class Gateway:
    """An OpenAI-compatible server over `routes` (agent name -> AgentRoute), on 127.0.0.1 by default."""

    def __init__(
        self,
        routes: dict[str, AgentRoute],
        worker: SamplingWorker | None,
        limits: GatewayLimits = GatewayLimits(),
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        responder: Responder | None = None,
    ) -> None:
        """responder: answers instead of the policies (scripted teammates for warm-up demonstrations); its
        calls are recorded with their messages and text but no tokens, and nothing is sampled."""
        self.routes, self.worker, self.limits, self.responder = routes, worker, limits, responder
        self.host, self.port = host, port
        self.token = token or secrets.token_urlsafe(24)  # random per run: only this run's programs get it
        self.sessions = SessionTable()
        self.tool_counts: dict[str, int] = {}  # answers to requests with tools, by `ToolAnswer.outcome`
        self.app = self._build_app()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle -----------------------------------------------------------------------------------
    def start(self) -> Gateway:
        """Serve in a background thread; returns once the socket accepts connections."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))  # port 0: a free port, read back below
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, log_level="warning", access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="teamrl-gateway-http", daemon=True
        )
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError(f"the teamrl gateway could not start on {self.host}:{self.port}")
            self._thread.join(0.01)
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            if self._thread is not None:
                self._thread.join(timeout=10)
            self._server = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def episode_url(self, session: EpisodeSession) -> str:
        return f"http://{self.host}:{self.port}/episodes/{session.id}/v1"

    # ---- routes ----------------------------------------------------------------------------------------
    def _build_app(self) -> FastAPI:
        app = FastAPI(title="teamrl gateway", docs_url=None, redoc_url=None, openapi_url=None)

        @app.exception_handler(StarletteHTTPException)
        async def http_error(_request: Request, err: StarletteHTTPException) -> JSONResponse:
            kind = "not_found_error" if err.status_code == 404 else "invalid_request_error"
            return JSONResponse(error_body(str(err.detail), kind, None), status_code=err.status_code)

        @app.exception_handler(Exception)
        async def server_error(_request: Request, err: Exception) -> JSONResponse:
            log.error("gateway: unexpected error", exc_info=err)
            return JSONResponse(
                error_body(f"internal error: {type(err).__name__}: {err}", "server_error", "internal_error"),
                status_code=500,
            )

        @app.get("/v1/models")
        async def models(request: Request) -> JSONResponse:
            return self._answer(lambda: self._models(request, None))

        @app.get("/episodes/{episode}/v1/models")
        async def episode_models(request: Request, episode: str) -> JSONResponse:
            return self._answer(lambda: self._models(request, episode))

        @app.post("/v1/chat/completions")
        async def chat(request: Request):
            return await self._chat(request, None)

        @app.post("/episodes/{episode}/v1/chat/completions")
        async def episode_chat(request: Request, episode: str):
            return await self._chat(request, episode)

        return app

    @staticmethod
    def _answer(make) -> JSONResponse:
        try:
            return JSONResponse(make())
        except ApiError as err:
            return JSONResponse(err.body(), status_code=err.status)

    def _authorize(self, request: Request, episode: str | None) -> EpisodeSession | None:
        """The request's session (None for the run-wide routes); ApiError 401/404/410 otherwise."""
        given = request.headers.get("authorization", "")
        given = given[7:].strip() if given.lower().startswith("bearer ") else ""
        session = None
        if episode is None:
            expected = self.token
        else:
            session = self.sessions.get(episode)
            if session is None:
                raise ApiError(
                    404,
                    f"no live episode {episode!r} (finished, dropped or never opened)",
                    "not_found_error",
                    "episode_not_found",
                )
            expected = session.key
        if not (given and secrets.compare_digest(given.encode(), expected.encode())):
            raise ApiError(
                401,
                "incorrect or missing API key (Authorization: Bearer <key>)",
                "invalid_request_error",
                "invalid_api_key",
            )
        return session

    def _models(self, request: Request, episode: str | None) -> dict:
        self._authorize(request, episode)
        return models_body(list(self.routes))

    async def _chat(self, request: Request, episode: str | None) -> Response:
        try:
            session = self._authorize(request, episode)
            chat = await read_chat_request(request, self.limits.max_body_bytes)
            agent = request.headers.get("x-teamrl-agent") or chat.model
            if agent not in self.routes:
                raise ApiError(
                    404,
                    f"the model {agent!r} is no agent of this team; agents: {', '.join(self.routes)} "
                    "(name the agent in `model` or the X-Teamrl-Agent header)",
                    "invalid_request_error",
                    "model_not_found",
                    "model",
                )
            messages = plain_messages(chat, self.limits.max_message_chars)
            tools = tool_request(chat.model_extra or {})
            prompt = None if self.responder is not None else self._prompt(agent, chat, messages, tools)
        except ApiError as err:
            return JSONResponse(err.body(), status_code=err.status)
        except ClientDisconnect:  # left while sending its body: nothing to answer, nothing went wrong
            return Response(status_code=499)
        except Exception as err:  # a request nothing above foresaw is still the client's: a 400
            log.exception("gateway: unexpected error while reading a request")
            return JSONResponse(
                error_body(
                    f"the request could not be read: {type(err).__name__}: {err}",
                    "invalid_request_error",
                    "invalid_request",
                ),
                status_code=400,
            )
        include = bool((chat.stream_options or {}).get("include_usage"))
        try:
            if prompt is None:
                generation, prompt_tokens = self._scripted(session, agent, messages), 0
            elif chat.stream and (tools is None or not tools.parsed):  # tokens as they are drawn
                return self._stream(request, session, agent, messages, *prompt, chat, include)
            else:
                generation, prompt_tokens = await self._generate(request, session, agent, messages, *prompt)
        except ApiError as err:
            return JSONResponse(err.body(), status_code=err.status)
        except ClientGone:
            return Response(status_code=499)  # nobody reads it: the client closed the connection
        stops = prompt[1].stop_strings if prompt is not None else ()
        answer = self._answer_of(agent, generation, tools, stops)
        logprobs = self._logprobs(agent, generation) if chat.logprobs else None
        if chat.stream:  # known whole: replayed, scripted, or buffered because tool calls are read from it
            events = stream_events(agent, answer, prompt_tokens, len(generation.response_ids), include, logprobs)
            return StreamingResponse(iter(events), media_type="text/event-stream")
        return JSONResponse(completion_body(agent, answer, prompt_tokens, len(generation.response_ids), logprobs))

    def _answer_of(
        self, agent: str, generation: Generation, tools: ToolRequest | None, stops: tuple[str, ...] = ()
    ) -> Answer:
        """The choice a sampled text makes: its tool calls when the request offered tools and it wrote valid
        ones, else the text, without the stop string that ended it (as OpenAI answers). Only the response
        changes: the session keeps the sampled ids and text as they were."""
        text = without_stop(generation.text, stops)
        if tools is None or not tools.parsed:
            return Answer(text, "stop" if generation.finished else "length")
        seed = repr((generation.prompt_ids, generation.response_ids, generation.text))
        parser = tool_call_parser(self.routes[agent].tool_parser)
        # the calls are read from the text as sampled: a stop string such as "</tool_call>" closes a call block
        read = read_answer(generation.text, generation.finished, tools, parser, seed)
        self.tool_counts[read.outcome] = self.tool_counts.get(read.outcome, 0) + 1
        content = read.content if read.tool_calls else without_stop(read.content or "", stops)
        return Answer(content, read.finish_reason, read.tool_calls)

    def _prompt(
        self, agent: str, chat: ChatRequest, messages: list[dict], tools: ToolRequest | None
    ) -> tuple[AgentRoute, SamplingParams, list[int]]:
        """(the agent's route, the request's sampling settings, its prompt token ids)."""
        route = self.routes[agent]
        policy = route.policy
        native = template_supports_tools(policy.tokenizer, policy.use_chat_template)
        rendered, template_tools = prompt_messages(messages, tools, native, policy.system_prompt)
        try:
            prompt_ids = (
                policy.encode_prompt(rendered, tools=template_tools)
                if template_tools
                else policy.encode_prompt(rendered)
            )
        except ValueError as err:
            raise ApiError(
                400, f"the messages cannot be rendered: {err}", code="invalid_messages", param="messages"
            ) from None
        return route, self._params(route, chat, len(prompt_ids)), prompt_ids

    async def _generate(
        self,
        request: Request,
        session: EpisodeSession | None,
        agent: str,
        messages: list[dict],
        route: AgentRoute,
        params: SamplingParams,
        prompt_ids: list[int],
    ) -> tuple[Generation, int]:
        """Sample (or replay) the agent's answer and record it in the session. ClientGone when the client
        disconnects first: the request is cancelled (skipped if not yet sampled), not recorded, and its
        call index is given back."""
        index, replayed = self._reserve_call(session, agent, messages, prompt_ids)
        if replayed is not None:
            return replayed, len(prompt_ids)
        future = self._submit(session, agent, index, route, params, prompt_ids)
        worker = self.worker
        assert worker is not None  # _submit checked it
        try:
            generation = await unless_disconnected(request, asyncio.wrap_future(future))
        except ClientGone:
            self._abandon(future, session, agent, index)
            raise
        except Exception as err:  # noqa: BLE001 - any sampling failure is the server's, answered as such
            raise ApiError(500, f"sampling failed: {err}", "server_error", "sampling_failed") from None
        finally:
            worker.delivered()  # the batching window waits while answers are still going out
        self._record(session, agent, index, messages, generation)
        return generation, len(prompt_ids)

    def _stream(
        self,
        request: Request,
        session: EpisodeSession | None,
        agent: str,
        messages: list[dict],
        route: AgentRoute,
        params: SamplingParams,
        prompt_ids: list[int],
        chat: ChatRequest,
        include_usage: bool,
    ) -> Response:
        """A streamed answer whose text is sent as its tokens are drawn (`streaming.StreamText` decides how
        much of it is certain); the call is recorded, as without streaming, before the finish chunk."""
        index, replayed = self._reserve_call(session, agent, messages, prompt_ids)  # ApiError before any byte
        if replayed is not None:
            answer = self._answer_of(agent, replayed, None, params.stop_strings)
            logprobs = self._logprobs(agent, replayed) if chat.logprobs else None
            events = stream_events(agent, answer, len(prompt_ids), len(replayed.response_ids), include_usage, logprobs)
            return StreamingResponse(iter(events), media_type="text/event-stream")
        feed = TokenFeed(StreamText.of(route.policy, params.stop_strings))
        future = self._submit(session, agent, index, route, params, prompt_ids, feed.put)
        return StreamingResponse(
            self._stream_events(session, agent, index, messages, future, feed, chat, include_usage),
            media_type="text/event-stream",
        )

    async def _stream_events(
        self,
        session: EpisodeSession | None,
        agent: str,
        index: int | None,
        messages: list[dict],
        future: Future,
        feed: TokenFeed,
        chat: ChatRequest,
        include_usage: bool,
    ) -> AsyncIterator[str]:
        """The events of a streamed answer: role, text deltas as tokens arrive, then the rest of the answer."""
        writer, recorded, worker = ChunkWriter(agent), False, self.worker
        assert worker is not None  # _submit checked it
        try:
            yield writer.role()
            async for delta in feed.deltas(future):
                yield writer.content(delta)
            try:
                generation: Generation = await asyncio.wrap_future(future)
            except Exception as err:  # noqa: BLE001 - any sampling failure is the server's
                for event in writer.error(ApiError(500, f"sampling failed: {err}", "server_error", "sampling_failed")):
                    yield event
                return
            finally:
                worker.delivered()
            try:
                self._record(session, agent, index, messages, generation)
            except ApiError as err:
                for event in writer.error(err):
                    yield event
                return
            recorded = True
            answer = self._answer_of(agent, generation, None, feed.text.stops)
            logprobs = self._logprobs(agent, generation) if chat.logprobs else None
            rest = feed.text.finish(answer.content or "")
            prompt_tokens, completion_tokens = len(generation.prompt_ids), len(generation.response_ids)
            for event in writer.ending(answer, prompt_tokens, completion_tokens, include_usage, logprobs, rest):
                yield event
        finally:
            if not recorded:  # the client left (or sampling failed): as a cancelled request without streaming
                self._abandon(future, session, agent, index)

    def _reserve_call(
        self, session: EpisodeSession | None, agent: str, messages: list[dict], prompt_ids: list[int]
    ) -> tuple[int | None, Generation | None]:
        """(the call's index in its session, its recorded answer when the session replays it, recorded again)."""
        if session is None:
            return None, None
        index = _reserve(session, agent)
        replayed = session.replayed(agent, index, prompt_ids)
        if replayed is not None:
            session.record(Call(agent, index, messages, replayed, replayed=True))
        return index, replayed

    def _submit(
        self,
        session: EpisodeSession | None,
        agent: str,
        index: int | None,
        route: AgentRoute,
        params: SamplingParams,
        prompt_ids: list[int],
        on_token: Callable[[int], None] | None = None,
    ) -> Future:
        """Hand the prompt to the sampling worker; an episode's request names its episode and batch place."""
        worker = self.worker
        assert worker is not None  # only a gateway with a responder has no worker, and it never samples
        if session is None:
            return worker.submit(route.policy, params, prompt_ids, on_token=on_token)
        order = (session.serial, agent, index)
        return worker.submit(route.policy, params, prompt_ids, session.id, order, on_token)

    @staticmethod
    def _abandon(future: Future, session: EpisodeSession | None, agent: str, index: int | None) -> None:
        """A request whose client left: cancelled (skipped if not yet sampled), its call index given back."""
        future.cancel()
        if session is not None and index is not None:
            session.release(agent, index)

    @staticmethod
    def _record(
        session: EpisodeSession | None, agent: str, index: int | None, messages: list[dict], generation: Generation
    ) -> None:
        """Record a sampled call in its session; ApiError 410 when the session closed while it was sampled."""
        if session is not None and index is not None:
            if session.closed:  # timed out or dropped while waiting: its calls no longer count
                raise ApiError(410, "this episode was closed (timed out or dropped)", code="episode_closed")
            session.record(Call(agent, index, messages, generation))

    def _logprobs(self, agent: str, generation: Generation) -> dict:
        """The `logprobs` object of a sampled answer (empty for scripted ones, which have no tokens)."""
        route = self.routes.get(agent)
        ids = generation.response_ids[: len(generation.logprobs)]
        tokens = [route.policy.tokenizer.decode([i]) for i in ids] if route is not None and ids else []
        return token_logprobs(tokens, generation.logprobs[: len(tokens)])

    def _scripted(self, session: EpisodeSession | None, agent: str, messages: list[dict]) -> Generation:
        assert self.responder is not None  # called only when the gateway answers with a responder
        text = self.responder(agent, messages)
        generation = Generation([], [], [], [], text, True)
        if session is not None:
            session.record(Call(agent, _reserve(session, agent), messages, generation))
        return generation

    def _params(self, route: AgentRoute, chat: ChatRequest, prompt_tokens: int) -> SamplingParams:
        """The agent's settings, with the request's length cap and stop strings (and sampling, if allowed)."""
        limit = route.params.max_new_tokens
        cap = chat.token_cap()
        changes: dict = {
            "max_new_tokens": min(cap, limit) if cap else limit,
            "stop_strings": tuple(dict.fromkeys(route.params.stop_strings + chat.stop_strings())),
        }
        if route.request_sampling:
            if chat.temperature is not None:
                changes["temperature"] = chat.temperature
            if chat.top_p is not None:
                changes["top_p"] = chat.top_p
            if changes.get("temperature", 1.0) < MIN_TEMPERATURE or changes.get("top_p", 1.0) < MIN_TOP_P:
                changes["temperature"], changes["top_p"] = 0.0, 1.0  # both limits are the argmax
        context = context_length(route.policy)  # the model's, or its engine's when that is shorter (vLLM)
        if context and prompt_tokens + changes["max_new_tokens"] > context:
            raise ApiError(
                400,
                f"the prompt has {prompt_tokens} tokens; with max_tokens "
                f"{changes['max_new_tokens']} it exceeds the model's context of {context}",
                code="context_length_exceeded",
            )
        return dataclasses.replace(route.params, **changes)


def _reserve(session: EpisodeSession, agent: str) -> int:
    """The agent's next call index in the session; ApiError 400 when its call budget is spent."""
    index = session.next_index(agent)
    if index is None:
        raise ApiError(
            400,
            f"agent {agent!r} made {session.max_calls} calls in this episode, the limit (workflow.max_turns)",
            code="call_limit",
        )
    return index
