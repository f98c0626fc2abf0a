"""Train-once, cache-on-disk α-PFN networks (the fixed-lengthscale test networks and the full-scale ones).

Networks are trained by :func:`optarium.bo.pfn.train_pfn` / :func:`~optarium.bo.pfn.train_alpha_pfn` from a
recipe (:data:`RECIPES`) and cached under ``$OPTARIUM_CACHE_DIR`` or ``~/.cache/optarium`` (``alpha-pfn/``),
keyed by the recipe, the torch version and a hash of the training code (the abstract syntax of the objects
the training runs, docstrings stripped, so documentation edits keep the cache and code edits retrain). No
network is ever downloaded; a missing or damaged cache file means training on the spot.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import inspect
import json
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from optarium._core.cache import cache_root

__all__ = ["RECIPES", "cache_path", "cached_head", "training_code_hash"]

#: name -> prior and training settings. ``fixed-l0.2``: the 1-D fixed-hyperparameter test networks
#: (lengthscale 0.2, variance 1, zero mean, noise sd 1e-3, raw targets) behind the unit tests and the quick.
#: ``hyper-ls``: the full scale's network pair on the spec's hyperprior GP prior (d in {1, 2}; lengthscale
#: ~ LogNormal(log 0.2, 0.5) per function and dimension; output variance 1 and constant mean ~ N(0, 0.5^2)
#: as in the paper's v1 prior; noise sd 1e-3), targets standardised per dataset, up to 40 context points (the
#: full's BO histories reach 35). Its steps are sized so that training plus the full's BO runs stay within
#: 30 CPU-minutes on one core (measured per step, see the registry notes).
RECIPES: dict[str, dict[str, Any]] = {
    "fixed-l0.2": {
        "prior": {
            "dims": [1],
            "num_features": 256,
            "lengthscale": 0.2,
            "noise_sd": 1e-3,
            "mean_sd": 0.0,
            "outputscale": 1.0,
        },
        "stage1": {
            "conditioning": ["none", "f_opt"],
            "standardize": False,
            "steps": 2000,
            "num_buckets": 256,
            "max_context": 16,
            "n_query": 20,
            "batch_size": 64,
            "lr": 1e-3,
            "x_encoder": "fourier",
        },
        "stage2": {
            "kind": "MES",
            "steps": 1200,
            "num_buckets": 64,
            "max_context": 16,
            "n_query": 20,
            "batch_size": 64,
            "lr": 1e-3,
            "x_encoder": "fourier",
        },
    },
    "hyper-ls": {
        "prior": {
            "dims": [1, 2],
            "num_features": 256,
            "lengthscale": ["lognormal", -1.6094379124341003, 0.5],
            "noise_sd": 1e-3,
            "mean_sd": 0.5,
            "outputscale": 1.0,
        },
        "stage1": {
            "conditioning": ["none", "f_opt"],
            "standardize": True,
            "steps": 3000,
            "num_buckets": 256,
            "max_context": 40,
            "n_query": 20,
            "batch_size": 64,
            "lr": 1e-3,
            "x_encoder": "fourier",
        },
        "stage2": {
            "kind": "MES",
            "steps": 2500,
            "num_buckets": 64,
            "max_context": 40,
            "n_query": 20,
            "batch_size": 64,
            "lr": 1e-3,
            "x_encoder": "fourier",
        },
    },
}

_HEADS: dict[str, Any] = {}


def training_code_hash() -> str:
    """SHA-256 of the docstring-free syntax trees of the code the training executes."""
    from optarium.bo import pfn

    objs = [pfn.BarDistribution, pfn.RFFDraw, pfn.GPRFFPrior, pfn._optimum_grid, pfn._argmax_on,
            pfn._argmax_on_grid2, pfn._Block,
            pfn._FourierEncoder, pfn.PFNTransformer, pfn.style_vector, pfn._standardize_ctx, pfn.PFNRegressor,
            pfn._cosine_lr, pfn._sample_batch, pfn.train_pfn, pfn.AlphaPFNHead, pfn.information_gain_targets,
            pfn.train_alpha_pfn]  # fmt: skip
    digest = hashlib.sha256()
    for obj in objs:
        tree = ast.parse(inspect.getsource(obj).lstrip())
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if (
                isinstance(body, list)
                and body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]
        digest.update(ast.dump(tree).encode())
    return digest.hexdigest()


def cache_path(name: str, seed: int = 0) -> Path:
    """Where the networks of recipe ``name`` and ``seed`` are cached."""
    ident = json.dumps([RECIPES[name], seed, torch.__version__, training_code_hash()], sort_keys=True)
    return cache_root("alpha-pfn") / f"{name}-{hashlib.sha256(ident.encode()).hexdigest()[:24]}.pt"


def cached_head(name: str = "fixed-l0.2", seed: int = 0, *, verbose: bool = False) -> Any:
    """The trained :class:`~optarium.bo.pfn.AlphaPFNHead` (with its stage-1 network) of recipe ``name``:
    from the in-process cache, the disk cache, or trained now (one torch thread: minutes) and cached."""
    if name not in RECIPES:
        raise ValueError(f"name: unknown recipe {name!r}; known: {sorted(RECIPES)}")
    key = f"{name}/{seed}"
    if key in _HEADS:
        return _HEADS[key]
    path = cache_path(name, seed)
    with _training_lock(path):  # concurrent processes (runs at --jobs > 1) train a recipe once, not each
        _HEADS[key] = _load_or_train(name, seed, path, verbose)
    return _HEADS[key]


@contextlib.contextmanager
def _training_lock(path: Path) -> Iterator[None]:
    """An OS file lock next to ``path`` (``filelock``) for the block; none if the cache is not writable."""
    from filelock import FileLock

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(path.with_suffix(".lock")))
        lock.acquire()
    except OSError as exc:
        warnings.warn(f"{path}: no training lock ({exc!r})", RuntimeWarning, stacklevel=3)
        yield
        return
    try:
        yield
    finally:
        lock.release()


def _load_or_train(name: str, seed: int, path: Path, verbose: bool) -> Any:
    from optarium.bo.pfn import AlphaPFNHead, GPRFFPrior, train_alpha_pfn, train_pfn

    if path.exists():
        try:
            return AlphaPFNHead.load(torch.load(path, map_location="cpu", weights_only=False))
        except (OSError, RuntimeError, EOFError, KeyError) as exc:  # damaged: retrain and overwrite
            warnings.warn(
                f"{path}: cached network unreadable ({exc!r}); retraining it", RuntimeWarning, stacklevel=2
            )
    rec = RECIPES[name]
    prior = GPRFFPrior.from_config(rec["prior"])

    def log(stage: str) -> Any:
        def cb(step: int, loss: float) -> None:
            if verbose and step % 100 == 0:
                print(f"{name} {stage} step {step} loss {loss:.4f}", flush=True)

        return cb

    with torch.random.fork_rng():
        ppd = train_pfn(prior, seed=seed, callback=log("stage1"), **rec["stage1"])
        head = train_alpha_pfn(ppd, prior, seed=seed, callback=log("stage2"), **rec["stage2"])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        torch.save(head.save(), tmp)
        os.replace(tmp, path)
    except OSError as exc:  # a read-only cache is no error, but say so: the next run trains again
        warnings.warn(f"{path}: trained network not cached ({exc!r})", RuntimeWarning, stacklevel=2)
    return head


def main(argv: list[str] | None = None) -> None:
    """``python -m optarium.bo._pfn_cache RECIPE [--seed S]``: train and cache a recipe's networks now (one
    torch thread), so that no experiment unit trains them; prints the CPU seconds it took."""
    import argparse
    import time

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("recipe", choices=sorted(RECIPES))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    path = cache_path(args.recipe, args.seed)  # before training: the code's files may change meanwhile
    t0 = time.process_time()
    cached_head(args.recipe, args.seed, verbose=True)
    print(f"{args.recipe} seed {args.seed}: {path} ({time.process_time() - t0:.0f} CPU-s)")


if __name__ == "__main__":
    main()
