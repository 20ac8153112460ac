"""The registry's BTrees, with a merge for concurrent changes that BTrees refuse.

BTrees merge two sessions' changes to different keys of one bucket, but refuse (raise a
conflict) when a change removes the bucket's first key or empties it, because the tree node
above may have changed too. That refusal is the common case of shared mode: ``submitting``
and the id sets of transient statuses are small and emptied by every submission, and
removing the oldest job of a bucket (or of a small repository) removes a first key while
another session adds a job to the same bucket. Retrying does not help: as long as the other
session keeps writing, every attempt meets the same refusal.

These subclasses first let BTrees try. When it refuses, they merge the three states (the
common ancestor, the committed one, ours) as mappings, applying each side's additions,
changes and removals; a key both sides changed differently stays a conflict. The merge is
used only where it is safe:

* a tree held in one bucket (no node above it): always;
* a bucket inside a larger tree: when neither side emptied it or changed which bucket
  follows it, and its merged first key is not below the first key left by a side that
  removed the old one (that side may have moved the node's separator key up to it; a key
  below the separator would be unreachable).
"""

from __future__ import annotations

from typing import Any

from BTrees.IIBTree import IISet, IITreeSet
from BTrees.IOBTree import IOBTree, IOBucket
from BTrees.OOBTree import OOBTree, OOBucket
from ZODB.POSException import ConflictError

__all__ = ["IdMap", "IdSet", "KeyMap"]

_GONE = object()  # the value of an absent key


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if a is _GONE or b is _GONE:
        return False
    return bool(a == b)


def _merge(
    base: dict[Any, Any], theirs: dict[Any, Any], ours: dict[Any, Any]
) -> dict[Any, Any] | None:
    """Both sides' changes applied to ``base``; None if a key was changed both ways."""
    changes = []
    for side in (theirs, ours):
        changes.append(
            {
                k: side.get(k, _GONE)
                for k in base.keys() | side.keys()
                if not _same(base.get(k, _GONE), side.get(k, _GONE))
            }
        )
    for key in changes[0].keys() & changes[1].keys():
        if not _same(changes[0][key], changes[1][key]):
            return None
    merged = dict(base)
    for change in changes:
        for key, value in change.items():
            if value is _GONE:
                merged.pop(key, None)
            else:
                merged[key] = value
    return merged


def _contents(flat: Any, is_set: bool) -> dict[Any, Any]:
    if is_set:
        return dict.fromkeys(flat, True)
    return dict(zip(flat[::2], flat[1::2], strict=True))


def _flat(merged: dict[Any, Any], is_set: bool) -> tuple[Any, ...]:
    keys = sorted(merged)
    if is_set:
        return tuple(keys)
    return tuple(item for key in keys for item in (key, merged[key]))


class _Refused(Exception):
    """The states cannot be merged safely: the BTrees conflict stands."""


class _Merging:
    """Mixin: BTrees' own resolution first, then ``_merged`` (refusing raises _Refused)."""

    _is_set = False

    def _p_resolveConflict(self, old: Any, committed: Any, new: Any) -> Any:
        try:
            return super()._p_resolveConflict(old, committed, new)  # type: ignore[misc]
        except ConflictError:
            try:
                return self._merged(old, committed, new)
            except Exception:  # refused, or states not comparable: the conflict stands
                pass
            raise

    def _merged(self, old: Any, committed: Any, new: Any) -> Any:
        raise NotImplementedError


class _MergingTree(_Merging):
    """Mixin for a BTree class: the merge of trees held in one bucket."""

    def _merged(self, old: Any, committed: Any, new: Any) -> Any:
        sides: list[dict[Any, Any]] = []
        for state in (old, committed, new):
            if state is None:
                sides.append({})
            elif len(state) == 1:
                sides.append(_contents(state[0][0][0], self._is_set))
            else:
                raise _Refused  # several buckets: each bucket merges on its own
        merged = _merge(*sides)
        if merged is None:
            raise _Refused
        if not merged:
            return None  # the state of an empty tree
        bucket_state = (_flat(merged, self._is_set),)
        return ((bucket_state,),)


class _MergingBucket(_Merging):
    """Mixin for the bucket class of a larger tree (the rules are in the module doc)."""

    def _merged(self, old: Any, committed: Any, new: Any) -> Any:
        states = (old, committed, new)
        following = [s[1] if len(s) > 1 else None for s in states]
        if not (_same(following[0], following[1]) and _same(following[0], following[2])):
            raise _Refused  # a bucket was split off or unlinked next to this one
        base, theirs, ours = (_contents(s[0], self._is_set) for s in states)
        if not base or not theirs or not ours:
            raise _Refused  # emptied: the tree unlinks the bucket
        merged = _merge(base, theirs, ours)
        if not merged:
            raise _Refused
        first, base_first = min(merged), min(base)
        for side in (theirs, ours):
            if base_first not in side and first < min(side):
                raise _Refused  # below a separator that side may have raised
        flat = _flat(merged, self._is_set)
        return (flat, following[0]) if following[0] is not None else (flat,)


class _IdBucket(_MergingBucket, IOBucket):  # type: ignore[misc]
    pass


class _KeyBucket(_MergingBucket, OOBucket):  # type: ignore[misc]
    pass


class _IdSetBucket(_MergingBucket, IISet):  # type: ignore[misc]
    _is_set = True


class IdSet(_MergingTree, IITreeSet):  # type: ignore[misc]
    """A set of job ids (the status and name indexes)."""

    _is_set = True
    _bucket_type = _IdSetBucket


class IdMap(_MergingTree, IOBTree):  # type: ignore[misc]
    """Job id -> value (``jobs``, ``status_of``, ``submitting``)."""

    _bucket_type = _IdBucket


class KeyMap(_MergingTree, OOBTree):  # type: ignore[misc]
    """Any key -> value (``active``, ``by_status``, ``by_name``)."""

    _bucket_type = _KeyBucket
    # A node above the buckets is rewritten whenever a bucket empties or splits. With
    # BTrees' 250 children it grew to 3 kB for 3,000 active subjobs and was rewritten every
    # 15 or so subjobs ending one after another; 32 keeps each rewrite under 1 kB.
    max_internal_size = 32


def _known_to_btrees_check() -> None:
    """``BTrees.check`` (the structural check ``ganga repository check`` relies on) finds
    the kind of a tree or bucket by its exact class: ours are listed as their bases."""
    from BTrees import check

    for ours, base in (
        (IdSet, IITreeSet),
        (IdMap, IOBTree),
        (KeyMap, OOBTree),
        (_IdSetBucket, IISet),
        (_IdBucket, IOBucket),
        (_KeyBucket, OOBucket),
    ):
        check._type2kind.setdefault(ours, check._type2kind[base])
    for tree in (IdSet, IdMap, KeyMap):  # a one-bucket tree is checked as its bucket
        check._btree2bucket.setdefault(tree, tree._bucket_type)


_known_to_btrees_check()
