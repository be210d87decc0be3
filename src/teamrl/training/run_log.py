"""What a run prints and what it only records: the user's terminal gets teamrl's own progress bars and
one-line messages; third-party progress bars are off, and warnings and library log records go to the
run's `train.log` instead of the terminal."""

from __future__ import annotations

import logging
from pathlib import Path

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# HTTP clients log one INFO record per request ("HTTP Request: POST ..."): an agent program's calls to the
# gateway would fill train.log with thousands of them. Their warnings and errors are kept.
_CHATTY_CLIENTS = ("httpx", "httpcore", "openai", "urllib3")


def _not_client_chatter(record: logging.LogRecord) -> bool:
    """False for an HTTP client's record below WARNING (kept out of train.log)."""
    if record.levelno >= logging.WARNING:
        return True
    return not any(record.name == name or record.name.startswith(name + ".") for name in _CHATTY_CLIENTS)


_open_logs = 0  # RunLogs open in this process; warnings are captured while any is


def quiet_third_party() -> None:
    """Turn off transformers' and the hub's progress bars ("Loading weights", "Writing model shards") and
    send transformers' log records through Python logging, where a run's `RunLog` keeps them."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.disable_progress_bar()
    hf_logging.disable_default_handler()  # its own stderr handler
    hf_logging.enable_propagation()  # ... so records reach the root logger (and train.log)
    try:
        from huggingface_hub.utils import disable_progress_bars
    except ImportError:
        return
    disable_progress_bars()


class RunLog:
    """While open: Python warnings and every log record of level INFO and up go to RUN_DIR/train.log.

    The root logger gets the file handler, so nothing falls back to Python's last-resort stderr handler;
    teamrl's alerts still reach the terminal through the training bar (`tqdm.write`).
    """

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / "train.log"
        self._handler = logging.FileHandler(self.path, encoding="utf-8")
        self._handler.setFormatter(logging.Formatter(_FORMAT))
        self._handler.setLevel(logging.INFO)
        self._handler.addFilter(_not_client_chatter)
        root = logging.getLogger()
        self._root_level = root.level
        root.addHandler(self._handler)
        if root.level > logging.INFO or root.level == logging.NOTSET:
            root.setLevel(logging.INFO)
        global _open_logs
        _open_logs += 1
        logging.captureWarnings(True)

    def close(self) -> None:
        root = logging.getLogger()
        root.removeHandler(self._handler)
        root.setLevel(self._root_level)
        self._handler.close()
        global _open_logs
        _open_logs -= 1
        if _open_logs == 0:
            logging.captureWarnings(False)
