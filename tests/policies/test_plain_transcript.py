"""How a model without a chat template (a base model) reads chat messages."""

from teamrl.policies.chat_encoding import plain_transcript
from teamrl.workflows.chat_shots import few_shot


def test_an_answer_follows_its_question_on_the_next_line_and_examples_are_paragraphs():
    messages = few_shot("Add.", [("1+1 =", "2"), ("2+3 =", "5")], "4+4 =")
    assert plain_transcript(messages) == "Add.\n\n1+1 =\n2\n\n2+3 =\n5\n\n4+4 ="


def test_a_system_prompt_and_a_plain_prompt_are_unchanged():
    assert plain_transcript([{"role": "user", "content": "q"}]) == "q"
    assert plain_transcript([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "q"}]) == \
        "Be brief.\n\nq"
