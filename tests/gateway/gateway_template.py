"""The chat template of the gateway tests' tiny policies (a module of its own: a test that imported it
from `conftest` got whichever conftest.py the full suite had imported last, tests/vllm's)."""

CHAT_TEMPLATE = ("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<assistant>{% endif %}")
