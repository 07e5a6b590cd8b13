"""The seed contract: the only place in dkrp where random generators are made.

Every random draw in dkrp is keyed by ``(seed, stream, block)`` and nothing else.
``stream`` names what is drawn (``"pool"``, ``"indices"``, ...) and ``block`` is the
index of a fixed-size block of hyperplanes or components, so any block can be
regenerated alone, in any process, in any order. Data chunks, workers and
threads never enter a draw.

We build ``SeedSequence(entropy=seed, spawn_key=(stream_id, block))`` directly,
which is stateless, unlike ``SeedSequence.spawn`` (see the dask/dask#1684 lesson),
and name the bit generator (PCG64) rather than relying on ``default_rng``.
"""

from __future__ import annotations

import hashlib
import numbers
import zlib

import numpy as np

from .errors import InvalidInputError

__all__ = [
    "BLOCK_SIZE",
    "block_generator",
    "stream_id",
    "resolve_seed",
    "draw_rows",
    "array_checksum",
    "draw_block",
]

#: Number of hyperplanes (rows) drawn from one generator. Part of the contract:
#: changing it changes every projector's features.
BLOCK_SIZE = 256

_MAX_SEED = 2**63 - 1


def stream_id(stream: str) -> int:
    """Stable integer id of a named random stream (CRC-32 of its UTF-8 name)."""
    return zlib.crc32(stream.encode("utf-8"))


def block_generator(seed: int, stream: str, block: int = 0) -> np.random.Generator:
    """Generator for one block of one stream.

    Parameters
    ----------
    seed : int
        Non-negative integer seed of the projector.
    stream : str
        Name of what is drawn, e.g. ``"pool"``.
    block : int, default=0
        Block index within the stream.

    Returns
    -------
    numpy.random.Generator
        A PCG64 generator that depends only on ``(seed, stream, block)``.

    Examples
    --------
    >>> a = block_generator(7, "pool", 3).standard_normal(4)
    >>> b = block_generator(7, "pool", 3).standard_normal(4)
    >>> bool((a == b).all())
    True
    """
    seq = np.random.SeedSequence(entropy=int(seed), spawn_key=(stream_id(stream), int(block)))
    return np.random.Generator(np.random.PCG64(seq))


def resolve_seed(random_state) -> int:
    """Turn a ``random_state`` parameter into the integer seed stored in specs.

    ``None`` draws a fresh seed from OS entropy (recorded, so the result is still
    reproducible from the spec). Integers are used as they are. Generator and
    RandomState instances are refused: their state cannot be broadcast as a
    small, exact spec.
    """
    if random_state is None:
        return int(np.random.SeedSequence().generate_state(1, np.uint64)[0] & _MAX_SEED)
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        seed = int(random_state)
        if seed < 0:
            raise InvalidInputError(
                f"random_state must be a non-negative integer or None, got {seed}."
            )
        return seed
    raise InvalidInputError(
        "random_state must be a non-negative integer or None (dkrp projectors are defined "
        f"by an integer seed so any worker can regenerate them); got {random_state!r}."
    )


def draw_rows(seed: int, stream: str, n_rows: int, sampler) -> np.ndarray:
    """Draw ``n_rows`` rows block by block.

    ``sampler(rng, n)`` returns an array with ``n`` rows. Rows ``[b*BLOCK_SIZE,
    (b+1)*BLOCK_SIZE)`` always come from ``block_generator(seed, stream, b)``, so
    ``draw_rows(..., n)[:m]`` equals ``draw_rows(..., m)`` when ``m`` is a multiple
    of ``BLOCK_SIZE`` and any block can be regenerated alone.
    """
    parts = []
    for block, start in enumerate(range(0, n_rows, BLOCK_SIZE)):
        n = min(BLOCK_SIZE, n_rows - start)
        parts.append(sampler(block_generator(seed, stream, block), n))
    if not parts:
        return sampler(block_generator(seed, stream, 0), 0)
    return np.concatenate(parts, axis=0)


def array_checksum(*arrays: np.ndarray) -> str:
    """SHA-256 over the dtype, shape and bytes of each array (C order)."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str(a.dtype.str).encode())
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def draw_block(seed: int, stream: str, block: int, n_rows: int, sampler) -> np.ndarray:
    """Rows ``[block*BLOCK_SIZE, ...)`` of ``draw_rows(seed, stream, n_rows, sampler)`` alone."""
    start = block * BLOCK_SIZE
    n = max(0, min(BLOCK_SIZE, n_rows - start))
    return sampler(block_generator(seed, stream, block), n)
