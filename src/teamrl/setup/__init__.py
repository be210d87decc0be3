"""Config -> a loaded team: the workflow, models and tokenizers, policies, the tiny default's warm-up.

Serving, evaluating, replaying and probing a team go through here; nothing here imports the training
loop (`teamrl.training`), which builds its team here too.
"""
