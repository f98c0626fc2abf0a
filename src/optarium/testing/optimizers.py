"""The optimizer conformance suite: checks every registered optimizer must pass.

An optimizer joins by adding an :class:`OptimizerCase` to :func:`optimizer_cases` (one entry, no copied
tests); ``tests/conformance/test_optimizers.py`` runs every check on every case. The checks are public so a
user can run them on an optimizer of their own.

Checks: reaches the known minimiser of an ill-conditioned quadratic and of the Rosenbrock function;
``state_dict`` round trip continues bit-identically; the foreach path equals the per-tensor path; two param
groups with the same settings equal one group, and a group's own ``lr`` is honoured; a parameter with
``grad=None`` is skipped (unchanged, no state); float32 and float64; seeded determinism; invalid
hyperparameters raise ``ValueError`` naming the argument; NaN gradients raise by default and are skipped
with ``nonfinite="skip"`` (the family's shared policy); an optimizer that needs a closure says so clearly
when called without one.

Drop-in checks (what PyTorch's generic optimizer tests ask of every ``torch.optim`` optimizer, restated):
a deep copy and a pickled copy continue exactly as the original; ``named_parameters()`` works and the names
reach the state dict; the four state-dict hooks run once each and their results are used; global and
instance step hooks fire once per step, in torch's order; a state dict whose groups lack the boolean flags
(an older or foreign checkpoint) loads and steps with the defaults; ``lr=0`` is valid and moves nothing; a
loss of shape ``[1]`` steps as a 0-d loss; a complex parameter moves as its real view, or is refused with a
``ValueError`` naming ``params``. ``tests/conformance/test_optimizer_checks_catch_bugs.py`` shows each of
these checks failing on an optimizer with the defect it looks for.

Optimizers that re-evaluate the loss declare ``needs_closure=True``: the checks then drive them with
``step(closure)`` where the closure zeroes the gradients, evaluates the loss on the current batch and calls
``backward``, as torch's own closure optimizers expect; it back-propagates only when
``torch.is_grad_enabled()``, so a line search may evaluate its trial points under ``torch.no_grad()``.
"""

from __future__ import annotations

import copy
import math
import pickle
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = [
    "CHECKS",
    "OptimizerCase",
    "check_closure_contract",
    "check_complex_parameters",
    "check_deepcopy_and_pickle",
    "check_foreach_matches_per_tensor",
    "check_grad_none_skipped",
    "check_invalid_hyperparameters",
    "check_loads_older_state_dict",
    "check_named_parameters",
    "check_nonfinite_gradients",
    "check_one_element_loss",
    "check_quadratic",
    "check_rosenbrock",
    "check_seeded_determinism",
    "check_state_dict_hooks",
    "check_state_dict_round_trip",
    "check_step_hooks_once",
    "check_two_param_groups",
    "check_zero_lr",
    "optimizer_cases",
    "quadratic_problem",
]

Factory = Callable[..., torch.optim.Optimizer]


@dataclass(frozen=True)
class OptimizerCase:
    """How to build and budget one optimizer for the conformance checks.

    Attributes:
        name: an id for the test report.
        factory: ``factory(params, **kwargs) -> Optimizer``; must accept ``lr`` and ``foreach``.
        quadratic: (lr, steps, max-norm tolerance in float64) for :func:`check_quadratic`.
        rosenbrock: (lr, steps, max-norm tolerance) for :func:`check_rosenbrock`.
        invalid: (kwargs, argument name) pairs that must raise ``ValueError`` naming the argument.
        float32_tol: tolerance of the float32 quadratic run.
        kwargs: extra keyword arguments for every construction (e.g. ``weight_decay=0``).
        needs_closure: the optimizer re-evaluates the loss, so it is stepped with ``step(closure)``.
        exempt: check name -> the reason this optimizer is exempt from it (reported as a skip with that
            reason; the reason must say which of the method's own tests covers the property instead).
    """

    name: str
    factory: Factory
    quadratic: tuple[float, int, float]
    rosenbrock: tuple[float, int, float]
    invalid: Sequence[tuple[Mapping[str, Any], str]] = ()
    float32_tol: float = 1e-3
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    needs_closure: bool = False
    exempt: Mapping[str, str] = field(default_factory=dict)

    def build(self, params: Iterable[Any], **kwargs: Any) -> torch.optim.Optimizer:
        """The optimizer over ``params`` with the case's kwargs updated by ``kwargs``."""
        return self.factory(params, **{**self.kwargs, **kwargs})


def optimizer_cases() -> list[OptimizerCase]:
    """Every registered optimizer's case (the registry of the conformance suite)."""
    from optarium.optim import (
        AdamWPower,
        AdGD,
        ClipSGD,
        GradPower,
        Lion,
        LionVR,
        MirrorDescent,
        NonmonotoneLineSearchGD,
        ReWA,
        RotatedAdamW,
        SAMPolyak,
    )
    from optarium.testing._analog_cases import analog_cases

    def sgd_power(params: Iterable[Any], *, lr: float, foreach: bool | None = None, **kw: Any) -> Any:
        return GradPower(torch.optim.SGD(params, lr=lr, foreach=foreach), foreach=foreach, **kw)

    def adamw_power(params: Iterable[Any], **kw: Any) -> Any:
        return AdamWPower(params, **kw)

    def clip_sgd(params: Iterable[Any], **kw: Any) -> Any:
        return ClipSGD(params, **kw)

    def rotated_adamw(params: Iterable[Any], **kw: Any) -> Any:
        return RotatedAdamW(params, **kw)

    def rewa(params: Iterable[Any], **kw: Any) -> Any:
        return ReWA(params, **kw)

    def lion(params: Iterable[Any], **kw: Any) -> Any:
        return Lion(params, **kw)

    def mirror_descent(params: Iterable[Any], **kw: Any) -> Any:
        return MirrorDescent(params, **kw)

    _ENTROPIC_ON_THE_SIMPLEX = (
        "the entropic map keeps every parameter on the probability simplex (last dimension), where the "
        "check's unconstrained minimiser is not reachable; its known-optimum checks are the zero-noise "
        "convergence on the quadratic over the simplex and the simplex invariant in "
        "tests/optim/test_levy_mirror.py"
    )
    mirror_invalid = [
        ({"lr": -1e-3}, "lr"),
        ({"lr": float("nan")}, "lr"),
        ({"variant": "eager"}, "variant"),
        ({"mirror": "spherical"}, "mirror"),
        ({"infeasible": "clip"}, "infeasible"),
        ({"feasibility_tol": -1.0}, "feasibility_tol"),
    ]

    def lion_vr(params: Iterable[Any], **kw: Any) -> Any:
        return LionVR(params, **kw)

    def sam_polyak(params: Iterable[Any], *, lr: float, **kw: Any) -> Any:
        return SAMPolyak(
            params, **kw
        )  # the Polyak step replaces lr (each group's lr is overwritten by gamma_t)

    def nonmonotone_ls(params: Iterable[Any], *, lr: float, **kw: Any) -> Any:
        return NonmonotoneLineSearchGD(params, **kw)  # the search replaces lr (overwritten by eta_k)

    def adgd(params: Iterable[Any], **kw: Any) -> Any:
        return AdGD(params, **kw)  # lr is the first step eta_0; later steps are adaptive

    nonmonotone_invalid = [
        ({"c": 0.0}, "c"),
        ({"c": 1.0}, "c"),
        ({"xi": 1.5}, "xi"),
        ({"xi": float("nan")}, "xi"),
        ({"eta_min": 0.0}, "eta_min"),
        ({"eta_max": 1e-7}, "eta_max"),
        ({"mode": "wolfe"}, "mode"),
        ({"init": "one"}, "init"),
        ({"c_p": 0.0}, "c_p"),
        ({"growth": 1.0}, "growth"),
        ({"backtrack": 1.0}, "backtrack"),
        ({"max_evals": 0}, "max_evals"),
        ({"f_star": float("inf")}, "f_star"),
        ({"bisect_rtol": -1.0}, "bisect_rtol"),
    ]

    _POLYAK_HAS_NO_LR = (
        "the Polyak step replaces the learning rate (every group's lr is overwritten by gamma_t), so there "
        "is no lr to set to 0; the step size itself is checked against sam-sps and its closed form in "
        "tests/optim/test_sam_polyak.py"
    )

    sam_polyak_invalid = [
        ({"rho": -0.1}, "rho"),
        ({"rho": float("nan")}, "rho"),
        ({"lambd": 1.5}, "lambd"),
        ({"lambd": -0.1}, "lambd"),
        ({"gamma_max": 0.0}, "gamma_max"),
        ({"c": 0.0}, "c"),
        ({"f_star": float("inf")}, "f_star"),
        ({"weight_decay": -1e-3}, "weight_decay"),
    ]

    lion_invalid = [
        ({"lr": -1e-3}, "lr"),
        ({"lr": float("nan")}, "lr"),
        ({"betas": (1.0, 0.99)}, "betas"),
        ({"betas": (0.9, -0.1)}, "betas"),
        ({"weight_decay": -0.1}, "weight_decay"),
    ]

    rewa_invalid = [
        ({"lr": -1e-3}, "lr"),
        ({"order": 0.0}, "order"),
        ({"order": float("nan")}, "order"),
        ({"adapt_exp": -0.5}, "adapt_exp"),
        ({"eps": -1e-3}, "eps"),
        ({"weight_decay": -0.1}, "weight_decay"),
        ({"momentum": 1.0}, "momentum"),
        ({"base": "adam"}, "base"),
        ({"betas": (1.0, 0.999)}, "betas"),
        ({"adam_eps": -1.0}, "adam_eps"),
    ]

    adamw_invalid = [
        ({"p": 0.0}, "p"),
        ({"p": -1.0}, "p"),
        ({"p": float("nan")}, "p"),
        ({"p": float("inf")}, "p"),
        ({"lr": -1e-3}, "lr"),
        ({"betas": (1.0, 0.999)}, "betas"),
        ({"betas": (0.9, -0.1)}, "betas"),
        ({"eps": -1.0}, "eps"),
        ({"weight_decay": -0.1}, "weight_decay"),
    ]
    return [
        # RotatedAdamW: the checks' 1-D tensors take its AdamW path; the rotation is covered by
        # tests/optim/test_basis_rotation.py (identity basis == AdamW, oracle quadratic, SOAP agreement)
        OptimizerCase(
            name="RotatedAdamW",
            factory=rotated_adamw,
            quadratic=(1e-3, 6000, 1e-4),
            rosenbrock=(2e-2, 7000, 1e-3),
            invalid=[
                ({"lr": -1e-3}, "lr"),
                ({"betas": (1.0, 0.95)}, "betas"),
                ({"shampoo_beta": 1.0}, "shampoo_beta"),
                ({"precondition_frequency": 0}, "precondition_frequency"),
                ({"eps": -1.0}, "eps"),
                ({"weight_decay": -0.1}, "weight_decay"),
                ({"geometry": "x"}, "geometry"),
            ],
        ),
        OptimizerCase(
            name="AdamWPower",
            factory=adamw_power,
            quadratic=(1e-2, 3000, 1e-4),
            rosenbrock=(2e-2, 7000, 1e-3),
            invalid=adamw_invalid,
            kwargs={"weight_decay": 0.0, "p": 1.2},
        ),
        OptimizerCase(
            name="GradPower(SGD)",
            factory=sgd_power,
            quadratic=(5e-2, 3000, 1e-4),
            rosenbrock=(2e-3, 10000, 2e-2),
            invalid=[({"p": 0.0}, "p"), ({"p": float("nan")}, "p")],
            kwargs={"p": 1.2},
        ),
        OptimizerCase(
            name="ClipSGD",
            factory=clip_sgd,
            quadratic=(0.15, 600, 1e-4),
            rosenbrock=(3e-3, 5000, 2e-2),
            invalid=[
                ({"clip": 0.0}, "clip"),
                ({"clip": -1.0}, "clip"),
                ({"clip": float("nan")}, "clip"),
                ({"lr": -1e-3}, "lr"),
                ({"clip_mode": "layer"}, "clip_mode"),
            ],
            kwargs={"clip": 1.0},
        ),
        # ReWA with M = 0 and exclude=None: the checks start from x = 0 and use 1-D parameters, and M > 0
        # freezes exact zeros by design (the sparsity mechanism), so the adaptive exponent is switched off.
        OptimizerCase(
            name="ReWA(SGD)",
            factory=rewa,
            quadratic=(5e-2, 3000, 1e-4),
            rosenbrock=(1e-3, 6000, 1e-3),
            invalid=rewa_invalid,
            kwargs={"order": 2.0, "adapt_exp": 0.0, "weight_decay": 0.0, "momentum": 0.9, "exclude": None},
        ),
        OptimizerCase(
            name="ReWA(AdamW)",
            factory=rewa,
            quadratic=(1e-2, 3000, 1e-4),
            rosenbrock=(2e-2, 7000, 1e-3),
            invalid=rewa_invalid,
            kwargs={"base": "adamw", "order": 2.0, "adapt_exp": 0.0, "weight_decay": 0.0, "exclude": None},
        ),
        # Polyak step sizes need no lr; a tiny rho keeps the ascent point close enough for exact convergence.
        OptimizerCase(
            name="SAMPolyak(USAM)",
            factory=sam_polyak,
            quadratic=(1.0, 300, 1e-6),
            rosenbrock=(1.0, 1000, 1e-3),
            invalid=sam_polyak_invalid,
            kwargs={"rho": 1e-4, "lambd": 0.0, "gamma_max": math.inf, "weight_decay": 0.0},
            needs_closure=True,
            exempt={"zero_lr": _POLYAK_HAS_NO_LR},
        ),
        OptimizerCase(
            name="SAMPolyak(SAM)",
            factory=sam_polyak,
            quadratic=(1.0, 300, 1e-4),
            rosenbrock=(1.0, 1500, 1e-3),
            invalid=sam_polyak_invalid,
            kwargs={"rho": 1e-6, "lambd": 1.0, "gamma_max": math.inf, "weight_decay": 0.0},
            needs_closure=True,
            exempt={"zero_lr": _POLYAK_HAS_NO_LR},
        ),
        # The search needs no lr; the equality-type search (eos-large-step's reconstructed rule) with xi = 0:
        # xi = 1 (the running mean of all losses) converges sublinearly, too slowly for these budgets.
        OptimizerCase(
            name="NonmonotoneLineSearchGD",
            factory=nonmonotone_ls,
            quadratic=(1.0, 100, 1e-6),
            rosenbrock=(1.0, 1000, 1e-3),
            invalid=nonmonotone_invalid,
            kwargs={"c": 0.5, "xi": 0.0, "mode": "equality", "bisect_rtol": 1e-3},
            needs_closure=True,
            exempt={
                "zero_lr": (
                    "the line search replaces the learning rate (every group's lr is overwritten by eta_k); "
                    "its step sizes are checked against the closed-form roots of test 2 in "
                    "tests/optim/test_nonmonotone_ls.py"
                )
            },
        ),
        OptimizerCase(
            name="AdGD",
            factory=adgd,
            quadratic=(1e-3, 600, 1e-6),
            rosenbrock=(1e-4, 6000, 1e-3),
            invalid=[({"lr": -1.0}, "lr"), ({"a": 0.0}, "a"), ({"eta_max": 0.0}, "eta_max")],
        ),
        # Mirror descent: the Euclidean map is SGD bit for bit; the entropic map works on the simplex, so the
        # checks' unconstrained parameters are projected onto it at the first step (infeasible="project").
        OptimizerCase(
            name="MirrorDescent(euclidean)",
            factory=mirror_descent,
            quadratic=(0.15, 600, 1e-4),
            rosenbrock=(1.9e-3, 5500, 2e-2),
            invalid=mirror_invalid,
            kwargs={"mirror": "euclidean"},
        ),
        OptimizerCase(
            name="MirrorDescent(entropic)",
            factory=mirror_descent,
            quadratic=(0.15, 600, 1e-4),
            rosenbrock=(3e-3, 5000, 2e-2),
            invalid=mirror_invalid,
            kwargs={"mirror": "entropic", "variant": "lazy", "infeasible": "project"},
            exempt={
                "quadratic_float64": _ENTROPIC_ON_THE_SIMPLEX,
                "quadratic_float32": _ENTROPIC_ON_THE_SIMPLEX,
                "rosenbrock": _ENTROPIC_ON_THE_SIMPLEX,
                "zero_lr": (
                    "the checks' parameters are off the simplex and infeasible='project' projects them at "
                    "the first step even with lr=0; lr=0 on feasible parameters moves nothing, tested in "
                    "tests/optim/test_levy_mirror.py"
                ),
            },
        ),
        # Sign methods move every coordinate by exactly lr: they settle within about lr of the optimum.
        OptimizerCase(
            name="Lion",
            factory=lion,
            quadratic=(1e-3, 3000, 2e-3),
            rosenbrock=(1e-3, 4500, 1e-2),
            invalid=lion_invalid,
            float32_tol=2e-3,
        ),
        OptimizerCase(
            name="LionVR",
            factory=lion_vr,
            quadratic=(1e-3, 3000, 2e-3),
            rosenbrock=(1e-3, 3000, 0.0),
            invalid=[*lion_invalid, ({"correction": -1.0}, "correction")],
            float32_tol=2e-3,
            needs_closure=True,
            exempt={
                "rosenbrock": (
                    "with exact gradients the variance-reduction term cancels and Lion-VR is sign "
                    "descent, which 2-cycles in the Rosenbrock valley at any constant lr; its known-optimum "
                    "checks are the quadratic here and the STORM identity and 2-lr neighbourhood tests in "
                    "tests/optim/test_lion_vr.py"
                )
            },
        ),
        *analog_cases(),  # aimc-sp: AnalogSGD / ResidualAnalogSGD, ideal and soft-bounds devices
    ]


def quadratic_problem(dtype: torch.dtype = torch.float64, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``(h, x_star)`` of ``f(x) = 0.5 * sum(h * (x - x_star)**2)``, d = 10, h = logspace(0, 1, 10)."""
    gen = torch.Generator().manual_seed(seed)
    h = torch.logspace(0, 1, 10, dtype=dtype)
    x_star = torch.randn(10, generator=gen, dtype=torch.float64).to(dtype)
    return h, x_star


def _step(case: OptimizerCase, opt: torch.optim.Optimizer, loss_fn: Callable[[], torch.Tensor]) -> None:
    if case.needs_closure:

        def closure() -> torch.Tensor:
            # back-propagate only with gradients enabled: a line search evaluates trial points under no_grad
            loss = loss_fn()
            if torch.is_grad_enabled():
                opt.zero_grad()
                loss.backward()
            return loss

        opt.step(closure)
    else:
        opt.zero_grad()
        loss_fn().backward()
        opt.step()


def _minimise(
    case: OptimizerCase, opt: torch.optim.Optimizer, loss_fn: Callable[[], Any], steps: int
) -> None:
    for _ in range(steps):
        _step(case, opt, loss_fn)


def check_quadratic(case: OptimizerCase, dtype: torch.dtype = torch.float64) -> float:
    """Run the case's quadratic budget from x0 = 0; assert the max-norm error to x* is within tolerance."""
    lr, steps, tol = case.quadratic
    if dtype != torch.float64:
        tol = case.float32_tol
    h, x_star = quadratic_problem(dtype)
    x = torch.zeros(10, dtype=dtype, requires_grad=True)
    opt = case.build([x], lr=lr)
    _minimise(case, opt, lambda: 0.5 * (h * (x - x_star) ** 2).sum(), steps)
    err = float((x.detach() - x_star).abs().max())
    assert x.dtype == dtype, f"{case.name}: parameter dtype changed to {x.dtype}"
    assert err <= tol, f"{case.name}: quadratic error {err:.3e} > {tol:.1e} ({dtype})"
    return err


def check_rosenbrock(case: OptimizerCase) -> float:
    """From (-1.2, 1), the minimiser (1, 1) of ``(1 - a)^2 + 100 (b - a^2)^2`` within the case's tolerance."""
    lr, steps, tol = case.rosenbrock
    z = torch.tensor([-1.2, 1.0], dtype=torch.float64, requires_grad=True)
    opt = case.build([z], lr=lr)
    _minimise(case, opt, lambda: (1 - z[0]) ** 2 + 100 * (z[1] - z[0] ** 2) ** 2, steps)
    err = float((z.detach() - 1).abs().max())
    assert err <= tol, f"{case.name}: Rosenbrock error {err:.3e} > {tol:.1e}"
    return err


def _mlp(seed: int, dtype: torch.dtype = torch.float64) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.Tanh(), torch.nn.Linear(12, 1)).to(dtype)


def _train(
    case: OptimizerCase, model: torch.nn.Module, opt: torch.optim.Optimizer, steps: int, seed: int
) -> None:
    gen = torch.Generator().manual_seed(seed)
    dtype = next(model.parameters()).dtype
    for _ in range(steps):
        x = torch.randn(16, 6, generator=gen, dtype=dtype)
        y = torch.sin(x.sum(1, keepdim=True))
        _step(case, opt, lambda x=x, y=y: ((model(x) - y) ** 2).mean())


def _same(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


def check_state_dict_round_trip(case: OptimizerCase, lr: float = 1e-2) -> None:
    """Save after 5 steps and load into a fresh optimizer on copied parameters: the next 5 steps match."""
    model = _mlp(0)
    opt = case.build(model.parameters(), lr=lr)
    _train(case, model, opt, 5, seed=1)
    saved_model = copy.deepcopy(model)
    saved_state = copy.deepcopy(opt.state_dict())
    _train(case, model, opt, 5, seed=2)

    opt2 = case.build(saved_model.parameters(), lr=lr * 3)  # lr must come back from the state dict
    opt2.load_state_dict(saved_state)
    _train(case, saved_model, opt2, 5, seed=2)
    assert _same(model, saved_model), f"{case.name}: continuation after load_state_dict differs"


def check_foreach_matches_per_tensor(case: OptimizerCase, lr: float = 1e-2) -> None:
    """``foreach=True`` and ``foreach=False`` give the same parameters after 10 steps (float64, 1e-12)."""
    a, b = _mlp(0), _mlp(0)
    _train(case, a, case.build(a.parameters(), lr=lr, foreach=True), 10, seed=1)
    _train(case, b, case.build(b.parameters(), lr=lr, foreach=False), 10, seed=1)
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-12, atol=1e-12)


def check_two_param_groups(case: OptimizerCase) -> None:
    """Two groups with the same settings equal one group (5 steps); a group's own lr is honoured (1 step)."""
    model = _mlp(0)
    ref = copy.deepcopy(model)
    first, second = list(model[0].parameters()), list(model[2].parameters())
    _train(case, model, case.build([{"params": first}, {"params": second}], lr=1e-2), 5, seed=1)
    _train(case, ref, case.build(ref.parameters(), lr=1e-2), 5, seed=1)
    assert _same(model, ref), f"{case.name}: two identical param groups differ from one group"

    # One step with group lrs (1e-2, 3e-3): each group moves as a one-group optimizer at its lr would.
    base = _mlp(0)
    split = copy.deepcopy(base)
    groups = [{"params": list(split[0].parameters())}, {"params": list(split[2].parameters()), "lr": 3e-3}]
    _train(case, split, case.build(groups, lr=1e-2), 1, seed=1)
    for lr, index in ((1e-2, 0), (3e-3, 2)):
        one = copy.deepcopy(base)
        _train(case, one, case.build(one.parameters(), lr=lr), 1, seed=1)
        for p, q in zip(split[index].parameters(), one[index].parameters(), strict=True):
            assert torch.equal(p, q), f"{case.name}: group lr {lr} not honoured"


def check_grad_none_skipped(case: OptimizerCase, lr: float = 1e-2) -> None:
    """A parameter whose ``grad`` is None is left unchanged and gets no state."""
    used = torch.randn(5, dtype=torch.float64, requires_grad=True)
    unused = torch.randn(5, dtype=torch.float64, requires_grad=True)
    before = unused.detach().clone()
    opt = case.build([used, unused], lr=lr)
    for _ in range(3):
        _step(case, opt, lambda: (used**2).sum())
    assert unused.grad is None
    assert torch.equal(unused.detach(), before), f"{case.name}: parameter without gradient changed"
    assert len(opt.state.get(unused, {})) == 0, f"{case.name}: state created for a parameter without gradient"


def check_seeded_determinism(case: OptimizerCase, lr: float = 1e-2) -> None:
    """Two runs from the same seed give bit-identical parameters."""
    a, b = _mlp(3), _mlp(3)
    _train(case, a, case.build(a.parameters(), lr=lr), 10, seed=7)
    _train(case, b, case.build(b.parameters(), lr=lr), 10, seed=7)
    assert _same(a, b), f"{case.name}: two seeded runs differ"


def check_invalid_hyperparameters(case: OptimizerCase) -> None:
    """Every invalid setting of the case raises ``ValueError`` whose message names the argument."""
    for kwargs, name in case.invalid:
        x = torch.zeros(3, requires_grad=True)
        try:
            case.build([x], **{"lr": 1e-2, **kwargs})
        except ValueError as exc:
            # the name as a word of its own ("p" must not pass because "positive" contains a p)
            named = re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", str(exc))
            assert named, f"{case.name}: ValueError for {kwargs} does not name {name!r}: {exc}"
        else:
            raise AssertionError(f"{case.name}: {kwargs} did not raise ValueError")


def check_nonfinite_gradients(case: OptimizerCase, lr: float = 1e-2) -> None:
    """NaN gradients raise ``NonFiniteGradientError`` by default; ``nonfinite="skip"`` changes nothing;
    ``nonfinite="off"`` does not look (no error, nothing counted; the update rule meets the NaN)."""
    from optarium.optim import NonFiniteGradientError

    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    opt = case.build([x], lr=lr)
    _step(case, opt, lambda: (x**2).sum())  # create the state
    x_before = x.detach().clone()
    try:
        _step(case, opt, lambda: (x * float("nan")).sum())
    except NonFiniteGradientError:
        pass
    else:
        raise AssertionError(f"{case.name}: a NaN gradient did not raise NonFiniteGradientError")
    assert torch.equal(x.detach(), x_before), f"{case.name}: a raising step changed the parameters"

    y = torch.randn(4, dtype=torch.float64, requires_grad=True)
    opt = case.build([y], lr=lr, nonfinite="skip")
    _step(case, opt, lambda: (y**2).sum())
    before, state = y.detach().clone(), copy.deepcopy(opt.state_dict())
    _step(case, opt, lambda: (y * float("inf")).sum())
    assert torch.equal(y.detach(), before), f"{case.name}: a skipped step changed the parameters"
    assert getattr(opt, "skipped_steps", None) == 1, (
        f"{case.name}: a skipped step is not counted in skipped_steps"
    )
    after = opt.state_dict()
    for key, value in state["state"].get(0, {}).items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(value, after["state"][0][key]), f"{case.name}: a skipped step changed {key!r}"
    z = torch.randn(4, dtype=torch.float64, requires_grad=True)
    opt = case.build([z], lr=lr, nonfinite="off")
    _step(case, opt, lambda: (z**2).sum())
    _step(case, opt, lambda: (z * float("nan")).sum())  # no check: the update sees the NaN, nothing raises
    assert getattr(opt, "skipped_steps", 0) == 0, f"{case.name}: nonfinite='off' counted a skipped step"
    try:
        case.build([y], lr=lr, nonfinite="ignore")
    except ValueError as exc:
        assert "nonfinite" in str(exc), f"{case.name}: ValueError does not name 'nonfinite': {exc}"
    else:
        raise AssertionError(f"{case.name}: nonfinite='ignore' did not raise ValueError")


def check_closure_contract(case: OptimizerCase, lr: float = 1e-2) -> None:
    """``step(closure)`` returns the closure's loss; a closure optimizer called without one says so."""
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    opt = case.build([x], lr=lr)

    def closure() -> torch.Tensor:
        loss = (x**2).sum()
        if torch.is_grad_enabled():
            opt.zero_grad()
            loss.backward()
        return loss

    expected = float((x.detach() ** 2).sum())
    loss = opt.step(closure)
    assert loss is not None and abs(float(loss.detach()) - expected) < 1e-12, (
        f"{case.name}: step(closure) lost the loss"
    )
    if case.needs_closure:
        try:
            opt.step()
        except (TypeError, ValueError, RuntimeError) as exc:
            assert "closure" in str(exc), f"{case.name}: the error without a closure does not say so: {exc}"
        else:
            raise AssertionError(f"{case.name}: step() without the required closure did not raise")


def check_deepcopy_and_pickle(case: OptimizerCase, lr: float = 1e-2) -> None:
    """A deep copy and a pickled copy of (model, optimizer) after 3 steps continue exactly as the original."""
    model = _mlp(0)
    opt = case.build(model.parameters(), lr=lr)
    _train(case, model, opt, 3, seed=1)
    copies = [copy.deepcopy((model, opt)), pickle.loads(pickle.dumps((model, opt)))]
    _train(case, model, opt, 3, seed=2)
    for how, (m, o) in zip(("deepcopy", "pickle"), copies, strict=True):
        assert type(o) is type(opt), f"{case.name}: {how} changed the optimizer's type"
        _train(case, m, o, 3, seed=2)
        assert _same(model, m), f"{case.name}: a {how} copy continues differently from the original"


def check_named_parameters(case: OptimizerCase, lr: float = 1e-2) -> None:
    """Built from ``named_parameters()`` it steps as from ``parameters()``; names reach the state dict."""
    a, b = _mlp(0), _mlp(0)
    opt_a = case.build(a.named_parameters(), lr=lr)
    _train(case, a, opt_a, 3, seed=1)
    _train(case, b, case.build(b.parameters(), lr=lr), 3, seed=1)
    assert _same(a, b), f"{case.name}: named parameters step differently"
    names = [n for g in opt_a.state_dict()["param_groups"] for n in g.get("param_names", [])]
    assert sorted(names) == sorted(n for n, _ in a.named_parameters()), (
        f"{case.name}: the state dict lost the parameter names: {names}"
    )
    fresh = case.build(b.named_parameters(), lr=lr)
    fresh.load_state_dict(opt_a.state_dict())


def check_state_dict_hooks(case: OptimizerCase, lr: float = 1e-2) -> None:
    """The four state-dict hooks registered on the optimizer each run once per call; results are used."""
    model = _mlp(0)
    opt = case.build(model.parameters(), lr=lr)
    _train(case, model, opt, 1, seed=1)
    calls: list[str] = []

    def post(o: Any, sd: dict[str, Any]) -> dict[str, Any]:
        calls.append("post")
        return {**sd, "tag": "post"}

    def load_pre(o: Any, sd: dict[str, Any]) -> dict[str, Any]:
        calls.append("load_pre")
        return {k: v for k, v in sd.items() if k != "tag"}

    opt.register_state_dict_pre_hook(lambda o: calls.append("pre"))
    opt.register_state_dict_post_hook(post)
    opt.register_load_state_dict_pre_hook(load_pre)
    opt.register_load_state_dict_post_hook(lambda o: calls.append("load_post"))
    sd = opt.state_dict()
    assert sd.get("tag") == "post", f"{case.name}: a state_dict post hook's result was not returned"
    opt.load_state_dict(sd)
    assert calls == ["pre", "post", "load_pre", "load_post"], f"{case.name}: state-dict hooks ran as {calls}"


def check_step_hooks_once(case: OptimizerCase, lr: float = 1e-2) -> None:
    """Global and instance step pre/post hooks each fire exactly once per ``step``, in torch's order."""
    import importlib

    optimizer_module = importlib.import_module("torch.optim.optimizer")
    model = _mlp(0)
    opt = case.build(model.parameters(), lr=lr)
    calls: list[str] = []
    handles = [
        optimizer_module.register_optimizer_step_pre_hook(lambda o, a, k: calls.append("global_pre")),
        optimizer_module.register_optimizer_step_post_hook(lambda o, a, k: calls.append("global_post")),
        opt.register_step_pre_hook(lambda o, a, k: calls.append("pre")),
        opt.register_step_post_hook(lambda o, a, k: calls.append("post")),
    ]
    try:
        _train(case, model, opt, 2, seed=1)
    finally:
        for h in handles:
            h.remove()
    expected = ["global_pre", "pre", "post", "global_post"] * 2
    assert calls == expected, f"{case.name}: step hooks ran as {calls}"


def check_loads_older_state_dict(case: OptimizerCase, lr: float = 1e-2) -> None:
    """A state dict whose groups lack the boolean / optional flags (``maximize``, ``foreach``, ... as in
    older checkpoints or other packages' optimizers) loads, and the next steps use the defaults."""
    model = _mlp(0)
    opt = case.build(model.parameters(), lr=lr)
    _train(case, model, opt, 3, seed=1)
    saved_model, sd = copy.deepcopy(model), copy.deepcopy(opt.state_dict())
    flags = [k for k, v in opt.defaults.items() if isinstance(v, bool) or v is None]
    for group in sd["param_groups"]:
        for k in flags:
            group.pop(k, None)
    _train(case, model, opt, 3, seed=2)
    opt2 = case.build(saved_model.parameters(), lr=lr)
    opt2.load_state_dict(sd)
    _train(case, saved_model, opt2, 3, seed=2)
    assert _same(model, saved_model), f"{case.name}: loading a state dict without {flags} changed the steps"


def check_zero_lr(case: OptimizerCase) -> None:
    """``lr=0`` is a valid setting (torch's rule: finite and >= 0) and a step with it moves nothing."""
    model = _mlp(0)
    before = copy.deepcopy(model)
    opt = case.build(model.parameters(), lr=0.0)
    _train(case, model, opt, 2, seed=1)
    assert _same(model, before), f"{case.name}: a step with lr=0 changed the parameters"


def check_one_element_loss(case: OptimizerCase, lr: float = 1e-2) -> None:
    """A closure returning a loss of shape ``[1]`` steps exactly as one returning a 0-d loss."""
    a, b = _mlp(0), _mlp(0)
    for model, shape in ((a, ()), (b, (1,))):
        opt = case.build(model.parameters(), lr=lr)
        gen = torch.Generator().manual_seed(1)
        for _ in range(3):
            x = torch.randn(16, 6, generator=gen, dtype=torch.float64)
            y = torch.sin(x.sum(1, keepdim=True))

            def closure(model: Any = model, opt: Any = opt, x: Any = x, y: Any = y, s: Any = shape) -> Any:
                loss = ((model(x) - y) ** 2).mean().reshape(s)
                if torch.is_grad_enabled():
                    opt.zero_grad()
                    loss.backward()
                return loss

            opt.step(closure)
    assert _same(a, b), f"{case.name}: a loss of shape [1] steps differently from a 0-d loss"


def check_complex_parameters(case: OptimizerCase, lr: float = 1e-2) -> None:
    """A complex parameter is optimised as its real view would be (torch's rule), or refused at once with a
    ``ValueError`` naming ``params``; never silently different (e.g. a dropped imaginary part)."""
    gen = torch.Generator().manual_seed(0)
    target = torch.randn(5, dtype=torch.complex128, generator=gen)
    w = torch.linspace(1.0, 3.0, 5, dtype=torch.float64)
    z = (torch.randn(5, dtype=torch.complex128, generator=gen)).requires_grad_(True)
    r = torch.view_as_real(z.detach()).clone().requires_grad_(True)
    rt = torch.view_as_real(target)
    try:
        opt_z = case.build([z], lr=lr)
        _minimise(case, opt_z, lambda: (w * (z - target).abs() ** 2).sum(), 5)
    except ValueError as exc:
        named = re.search(r"\bparams\b", str(exc))
        assert named, f"{case.name}: refusing complex parameters does not name params: {exc}"
        return
    opt_r = case.build([r], lr=lr)
    _minimise(case, opt_r, lambda: (w[:, None] * (r - rt) ** 2).sum(), 5)
    torch.testing.assert_close(
        torch.view_as_real(z.detach()),
        r.detach(),
        rtol=1e-10,
        atol=1e-12,
        msg=lambda m: f"{case.name}: a complex parameter moves unlike its real view: {m}",
    )


#: Every check, by name, for parametrised tests.
CHECKS: Mapping[str, Callable[[OptimizerCase], Any]] = {
    "quadratic_float64": check_quadratic,
    "quadratic_float32": lambda case: check_quadratic(case, torch.float32),
    "rosenbrock": check_rosenbrock,
    "state_dict_round_trip": check_state_dict_round_trip,
    "foreach_matches_per_tensor": check_foreach_matches_per_tensor,
    "two_param_groups": check_two_param_groups,
    "grad_none_skipped": check_grad_none_skipped,
    "seeded_determinism": check_seeded_determinism,
    "invalid_hyperparameters": check_invalid_hyperparameters,
    "nonfinite_gradients": check_nonfinite_gradients,
    "closure_contract": check_closure_contract,
    "deepcopy_and_pickle": check_deepcopy_and_pickle,
    "named_parameters": check_named_parameters,
    "state_dict_hooks": check_state_dict_hooks,
    "step_hooks_once": check_step_hooks_once,
    "loads_older_state_dict": check_loads_older_state_dict,
    "zero_lr": check_zero_lr,
    "one_element_loss": check_one_element_loss,
    "complex_parameters": check_complex_parameters,
}
