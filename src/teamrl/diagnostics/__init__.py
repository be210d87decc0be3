"""Role-aware training diagnostics: what each role (and each duplicated agent) does to the update.

Pure functions and small stateful trackers; nothing here prints or writes files. The training loop
logs what they return (metric names under `diag/role/<role>/...` and `diag/agent/<agent>/...`) and
prints the alerts.

- `rollout`: per-role / per-agent reward, advantage, length, format and accuracy statistics;
- `diversity`: how different the parallel outputs of duplicated agents are;
- `sketch`: gradient vectors for cosines (exact for small models, a count sketch for big ones);
- `gradients`: per-role gradient norms, shares, coherence and damping inside one policy's update;
- `drift`: each metric against its own start-of-training baseline;
- `alerts`: dominant role, echo chamber and collapse, in plain words.
"""

from teamrl.diagnostics.alerts import Alert, AlertMonitor
from teamrl.diagnostics.drift import Baselines
from teamrl.diagnostics.gradients import RoleGradients
from teamrl.diagnostics.rollout import rollout_diagnostics

__all__ = ["Alert", "AlertMonitor", "Baselines", "RoleGradients", "rollout_diagnostics"]
