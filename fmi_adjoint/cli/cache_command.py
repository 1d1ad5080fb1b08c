"""``fmi-adjoint cache info|clear``: what the build cache holds, and emptying it.

The command only reads and removes; the cache itself is :mod:`fmi_adjoint.cache`.  Problems
(a cache folder that is a file, another user's, not a cache, cannot be read, or an entry
another process holds longer than ``--wait``) raise :class:`~fmi_adjoint.cache.CacheError`,
which :func:`fmi_adjoint.cli.main.main` turns into the one-line error with exit code 2.
Notes (waiting for another process, what ``clear`` left and why) go to stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from ..cache import CACHE_VARIABLE, LOCK_TIMEOUT, BuildCache, CacheInfo

__all__ = ["add_cache_parser", "cmd_cache", "format_size"]


def add_cache_parser(sub) -> None:
    """Register ``cache info [--json]`` and ``cache clear`` on the subparsers ``sub``."""
    cache = sub.add_parser("cache", help="show or clear the build cache (derived models, compiled engines)",
                           description=f"The build cache folder is ${CACHE_VARIABLE} if set, else the user's cache "
                           "folder + fmi-adjoint.")
    actions = cache.add_subparsers(dest="cache_command", required=True, metavar="ACTION")
    info = actions.add_parser("info", help="the cache folder, whether it is usable, its entries and their size")
    info.add_argument("--json", action="store_true", help="print JSON to stdout")
    clear = actions.add_parser("clear", help="remove every entry (the folder itself stays)")
    clear.add_argument("--wait", type=_seconds, default=LOCK_TIMEOUT, metavar="SECONDS",
                       help="how long to wait for an entry another fmi-adjoint process is building "
                            f"(default {LOCK_TIMEOUT:g})")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds >= 0 (e.g. 60)")
    return value


def _note(text: str) -> None:
    print(text, file=sys.stderr)


def format_size(n_bytes: int) -> str:
    """``n_bytes`` for people: "512 B", "3.4 KiB", "1.2 MiB", "2.0 GiB"."""
    size = float(n_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{n_bytes} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")  # the loop returns at GiB


def _info_json(info: CacheInfo) -> dict:
    return {
        "root": str(info.root),
        "usable": info.usable,
        "reason": info.reason,
        "total_bytes": info.total_bytes,
        "entries": [{"kind": e.kind, "key": e.key, "size_bytes": e.size_bytes, "created": e.created.isoformat()}
                    for e in info.entries],
        "skipped": list(info.skipped),
    }


def cmd_cache(args: argparse.Namespace) -> int:
    """Run ``cache info`` or ``cache clear`` on :meth:`BuildCache.default`; exit code 0."""
    cache = BuildCache.default()
    if args.cache_command == "info":
        info = cache.info()
        if args.json:
            print(json.dumps(_info_json(info), indent=2))
            return 0
        print(f"cache folder: {info.root}")
        print("usable: yes" if info.usable else f"usable: no ({info.reason}); builds go to a private temporary "
              f"folder: set {CACHE_VARIABLE} to a writable folder")
        print(f"entries: {len(info.entries)}, {format_size(info.total_bytes)}")
        for entry in info.entries:
            print(f"  {entry.kind:8s} {entry.key[:16]}  {format_size(entry.size_bytes):>10s}  "
                  f"{entry.created.astimezone():%Y-%m-%d %H:%M}")
        for text in info.skipped:
            print(f"  not listed: {text}")
        return 0
    before = cache.info().total_bytes
    removed = cache.clear(note=_note, lock_timeout=args.wait)
    freed = max(before - cache.info().total_bytes, 0)
    print(f"removed {removed} {'entry' if removed == 1 else 'entries'} ({format_size(freed)}) from {cache.root}")
    return 0
