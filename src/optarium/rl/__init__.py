"""Reinforcement learning: policy-optimisation surrogate losses of batched tensors.

The contract (:mod:`optarium.rl.losses`): ``loss_fn(logp, old_logp, advantages, mask) -> (loss,
diagnostics)``, a 0-d loss to minimise and detached 0-d diagnostics; :class:`SurrogateLoss` is the protocol,
:func:`check_batch` and :func:`aggregate` the shared input validation and token averaging. The reference loss
is PPO's clipped surrogate :func:`ppo_clip_loss` (:mod:`optarium.rl.ppo`). Every loss passes
:mod:`optarium.testing.losses` (float64 gradient check included).
"""

from optarium.rl.losses import AGGREGATIONS, SurrogateLoss, aggregate, check_batch
from optarium.rl.ppo import ppo_clip_loss

__all__ = ["AGGREGATIONS", "SurrogateLoss", "aggregate", "check_batch", "ppo_clip_loss"]

from optarium.rl import cvar_quantile, gipo, segment_po
from optarium.rl.advantages import gae, group_normalized_advantages
from optarium.rl.gipo import gipo_loss, trust_weight
from optarium.rl.replay import train_replay_pg
from optarium.rl.segment_po import segment_policy_loss

__all__ += ["gae", "gipo", "gipo_loss", "group_normalized_advantages", "train_replay_pg", "trust_weight"]
__all__ += ["segment_po", "segment_policy_loss"]
__all__ += ["cvar_quantile"]
