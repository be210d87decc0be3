"""The tiny default model's curriculum: scripted agents whose episodes warm it up for each task.

These are not team designs (those are in `teamrl.workflows`): each module scripts the agents of one
task's workflows, imperfect in a stated way, and `driver` plays scripted agents through any workflow
to yield (agent, prompt, response) demonstrations. `teamrl.config.tasks` binds them to tasks;
`teamrl.setup.tiny_default` trains on them.
"""
