"""Trees of dicts, lists, None and arrays in HDF5 groups, for checkpoints and learner files:
written, read back link-safely (the file's own items only; nothing unpickled) and digested."""
import hashlib

import h5py
import numpy as np

from .taskfile import own_item


def write_tree(group, value) -> None:
    """Write a tree of dicts, lists, None and arrays into an HDF5 group (read_tree reads it)."""
    for key, item in value.items():
        key = str(key)
        if isinstance(item, dict):
            write_tree(group.create_group(key), item)
        elif isinstance(item, list):
            sub = group.create_group(key)
            sub.attrs["list"] = len(item)
            write_tree(sub, {str(i): v for i, v in enumerate(item)})
        elif item is None:
            group.create_group(key).attrs["none"] = True
        else:
            group.create_dataset(key, data=np.asarray(item))


class Damaged(Exception):
    """A part of the file that cannot be what a checkpoint writes (message: what and where)."""


def read_tree(group):
    """The tree :func:`write_tree` wrote into ``group``."""
    if group.attrs.get("none", False):
        return None
    if "list" in group.attrs:
        return [read_item(group, str(i)) for i in range(int(group.attrs["list"]))]
    return {key: read_item(group, key) for key in group.keys()}


def read_item(group, key: str):
    """``group[key]`` read as a tree or an array: its own item only (a link is :class:`Damaged`)."""
    try:
        item = own_item(group, key)
    except LookupError as what:
        why = "; a checkpoint holds none" if str(what) == "a link" else ""
        raise Damaged(f"{group.name}/{key} is {what}{why}") from None
    return read_tree(item) if isinstance(item, h5py.Group) else item[()]


def tree_digest(head: str, tree) -> str:
    """SHA-256 of the text ``head`` and a tree of dicts, lists, None and arrays (keys in sorted
    order, each array's dtype, shape and bytes): a learner file's digest."""
    h = hashlib.sha256(head.encode() + b"\0")
    digest_into(h, "state", tree)
    return "sha256:" + h.hexdigest()


def digest_into(h, where: str, value) -> None:
    """Add a tree (named ``where``) to the hash ``h`` as :func:`tree_digest` describes."""
    if isinstance(value, dict):
        h.update(f"{where}:dict:{len(value)}\0".encode())
        for key in sorted(value, key=str):
            digest_into(h, f"{where}/{key}", value[key])
    elif isinstance(value, list):
        h.update(f"{where}:list:{len(value)}\0".encode())
        for i, item in enumerate(value):
            digest_into(h, f"{where}/{i}", item)
    elif value is None:
        h.update(f"{where}:none\0".encode())
    else:
        a = np.ascontiguousarray(value)
        h.update(f"{where}:{a.dtype.str}:{a.shape}\0".encode())
        h.update(a.tobytes())
