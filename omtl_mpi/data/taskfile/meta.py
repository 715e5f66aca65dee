"""Reading and checking a task file's structure (:func:`read_meta`): every array's shape, dtype
and links checked, every problem one line, before any feature value is read."""
from __future__ import annotations

import h5py
import numpy as np

from ...errors import DataError
from ...metrics import offsets_of
from ..footprint import check_declared
from .hdf5 import _check_version, _has, _link_problem, _open, _read_values
from .schema import _CSR, _V2, SHOWN, SPARSE_MAX_DIM, SPARSE_VERSION, TaskMeta, _label, _more


def read_meta(path) -> TaskMeta:
    """Read and check a task-stream file's structure (no feature values are read).

    Raises
    ------
    DataError
        Listing every structural problem, one per line.
    """
    path = str(path)
    with _open(path) as f:
        version = _check_version(path, f)
        if version >= 2:
            return _read_meta_v2(path, f, version)
        groups, indices, problems = _task_groups(path, f)
        names, lengths, dims = [], [], {}
        for k, key in sorted(indices.items()):         # 0..K-1, without gaps
            name, rows, dim, found = _task_structure(path, f, groups, key, k)
            names.append(name)
            lengths.append(rows)
            if dim is not None:
                dims[k] = dim
            problems += found
        first = min(dims, default=None)         # a line for each d other than the first task's
        problems += [f"{path}: {_label(k, names[k])} has d={dk} features but "
                     f"{_label(first, names[first])} has d={dims[first]}; "
                     "all tasks must have the same features"
                     for k, dk in dims.items() if dk != dims[first]]
        if problems:
            raise DataError("\n".join(problems))
        lengths = np.array(lengths, dtype=np.int64)
        return TaskMeta(path=path, names=tuple(names), lengths=lengths,
                        dim=int(dims[min(dims)]), version=1, offsets=offsets_of(lengths),
                        **_described(f))


def _described(f) -> dict:
    return {"source": str(f.attrs.get("source", "")),
            "description": str(f.attrs.get("description", ""))}


def _v2_datasets(path: str, f, sparse: bool = False) -> tuple[dict, list]:
    """A version 2 file's datasets by name, and the lines about those missing, links (refused, not
    followed) or groups (but a sparse /X, with ``sparse``: version 3)."""
    missing = [name for name in _V2 if not _has(f, name)]
    if len(missing) == len(_V2):
        raise DataError(f"{path}: no /X, /y or /offsets; this is not an omtl-mpi task-stream file "
                        "(convert it with 'omtl-mpi data import')")
    problems = []
    if missing:
        shown = ", ".join(f"/{name}" for name in missing)
        problems.append(f"{path}: {shown} missing; a version 2 task file holds /X, /y, /offsets, "
                        "/names and /name_offsets: import or copy it again")
    found = {}
    for name in _V2:
        if name in missing:
            continue
        link = f.get(name, getlink=True)
        if not isinstance(link, h5py.HardLink):
            why = _link_problem(f, f, name)
            problems.append(f"{path}: /{name} " + (why.strip() if why else (
                f"is a soft link to {link.path}; a task file holds its arrays under their own "
                "names (links are refused): import or copy it again")))
            continue
        obj = f[name]
        if sparse and name == "X":
            if not isinstance(obj, h5py.Group):
                problems.append(f"{path}: /X must be a group of the arrays {', '.join(_CSR)} in "
                                "a version 3 (sparse) file: import or copy it again")
                continue
            parts = [p for p in _CSR if not _has(obj, p)]
            parts += [p for p in _CSR if p not in parts and not (
                isinstance(obj.get(p, getlink=True), h5py.HardLink) and isinstance(obj[p], h5py.Dataset))]
            if parts:
                problems.append(f"{path}: /X/{parts[0]} is missing, a link or not an array; a "
                                f"sparse /X holds the arrays {', '.join(_CSR)}: import or copy it "
                                "again")
                continue
        elif not isinstance(obj, h5py.Dataset):
            problems.append(f"{path}: /{name} must be a dataset (an array), not a group")
            continue
        found[name] = obj
    return found, problems


def _sparse_shape(path: str, X, problems: list):
    """(rows, d, nnz, most entries of a row) of a sparse /X group, checked from its attributes
    and its arrays' shapes (no values read but two of indptr); None where they are wrong."""
    shape = np.asarray(X.attrs.get("shape", []))
    data, indices, indptr = (X[p] for p in _CSR)
    before = len(problems)
    if shape.shape != (2,) or shape.dtype.kind not in "iu" or (shape < 0).any():
        problems.append(f"{path}: /X has no valid shape attribute (rows, features)")
        return None
    rows, d = int(shape[0]), int(shape[1])
    if d < 1 or d > SPARSE_MAX_DIM:
        problems.append(f"{path}: /X has {d} features; a sparse file holds 1 to {SPARSE_MAX_DIM}")
    for ds, name, kinds in ((data, "data", "fiu"), (indices, "indices", "iu"), (indptr, "indptr", "iu")):
        if ds.ndim != 1 or ds.dtype.kind not in kinds:
            problems.append(f"{path}: /X/{name} must be a 1-D array of "
                            f"{'numbers' if kinds == 'fiu' else 'integers'}, got shape {ds.shape} "
                            f"and dtype {ds.dtype}")
    if len(problems) > before:
        return None
    if data.shape != indices.shape:
        problems.append(f"{path}: /X/data holds {data.shape[0]} values but /X/indices "
                        f"{indices.shape[0]} columns; they must match")
    if indptr.shape[0] != rows + 1:
        problems.append(f"{path}: /X/indptr holds {indptr.shape[0]} values; a sparse /X of "
                        f"{rows} rows needs {rows + 1}")
    elif len(problems) == before:
        ends = indptr[[0, rows]] if rows else indptr[[0, 0]]
        if int(ends[0]) != 0 or int(ends[1]) != data.shape[0]:
            problems.append(f"{path}: /X/indptr runs from {int(ends[0])} to {int(ends[1])}; it "
                            f"must run from 0 to {data.shape[0]} (the entries)")
    most = np.asarray(X.attrs.get("max_row_nnz", []))
    if most.shape != () or most.dtype.kind not in "iu" or not 0 <= int(most) <= d:
        problems.append(f"{path}: /X has no valid max_row_nnz attribute (the most entries of a row)")
    if len(problems) > before:
        return None
    most, nnz = int(most), int(data.shape[0])
    # the attributes size what a run allocates: a wrong one is a damaged file, not an error in
    # the middle of a run. max_row_nnz <= nnz <= rows x max_row_nnz; each block's rows are
    # checked against it as read
    if not most <= nnz <= rows * most:
        problems.append(f"{path}: /X holds {nnz:,} entries in {rows:,} rows, which its "
                        f"max_row_nnz attribute of {most:,} (the most entries of a row) "
                        "contradicts; the file is damaged: import or copy it again")
        return None
    return rows, d, nnz, most


def _index_values(path: str, ds, name: str, problems: list):
    """The values of /offsets or /name_offsets as int64 where they are a 1-D array of at least
    two integers starting at 0, else None (with the reason in ``problems``)."""
    if ds.dtype.kind not in "iu":
        problems.append(f"{path}: /{name} must be integers, got dtype {ds.dtype}")
        return None
    if ds.ndim != 1:
        problems.append(f"{path}: /{name} must be 1-D, got shape {ds.shape}")
        return None
    if ds.shape[0] < 2:
        problems.append(f"{path}: /{name} holds {ds.shape[0]} value(s); it must hold K+1 >= 2 "
                        "(one task at least)")
        return None
    check_declared(path, f"/{name}", ds.shape[0] * 8)
    values = _read_values(ds.parent, name, path)
    if values.dtype.kind == "u" and values.max() > np.iinfo(np.int64).max:
        problems.append(f"{path}: /{name} holds values beyond 2^63; the file is damaged")
        return None
    values = values.astype(np.int64)
    if values[0] != 0:
        problems.append(f"{path}: /{name} must start at 0, got {int(values[0])}")
        return None
    return values


def _decoded_names(path: str, found: dict, count: int | None, problems: list) -> list | None:
    """The task names (UTF-8, bad bytes replaced), or None with the reason in ``problems``."""
    blob, ends = found.get("names"), found.get("name_offsets")
    if blob is None or ends is None:
        return None
    if blob.ndim != 1 or blob.dtype != np.uint8:
        problems.append(f"{path}: /names must be a 1-D array of bytes (uint8, UTF-8), got shape "
                        f"{blob.shape} and dtype {blob.dtype}")
        return None
    before = len(problems)
    offsets = _index_values(path, ends, "name_offsets", problems)
    if offsets is None:
        return None
    if count is not None and len(offsets) != count + 1:
        problems.append(f"{path}: /name_offsets gives {len(offsets) - 1} name(s) but /offsets "
                        f"{count} task(s); there must be one name per task")
    if np.any(np.diff(offsets) < 0):
        k = int(np.flatnonzero(np.diff(offsets) < 0)[0])
        problems.append(f"{path}: /name_offsets decreases at task {k}; it must not decrease")
    if offsets[-1] != blob.shape[0]:
        problems.append(f"{path}: /name_offsets ends at {int(offsets[-1])} but /names holds "
                        f"{blob.shape[0]} bytes; it must end at their number")
    if len(problems) > before:
        return None
    check_declared(path, "/names", blob.shape[0])
    raw = _read_values(blob.parent, "names", path).tobytes()
    o = offsets.tolist()
    return [raw[a:b].decode("utf-8", "replace") for a, b in zip(o[:-1], o[1:])]


def _offset_problems(path: str, offsets: np.ndarray, names, rows) -> list:
    """Lines for offsets that do not increase strictly (an empty task) or end but at ``rows``."""
    problems, wrong = [], np.flatnonzero(np.diff(offsets) <= 0)
    for k in wrong[:SHOWN].tolist():
        name = names[k] if names is not None else f"task{k}"
        a, b = int(offsets[k]), int(offsets[k + 1])
        problems.append(f"{path}: {_label(k, name)}: the task is empty (no samples): /offsets "
                        f"{k} and {k + 1} are both {a}" if a == b else
                        f"{path}: {_label(k, name)}: /offsets decreases from {a} to {b}; "
                        "offsets must increase strictly")
    if len(wrong) > SHOWN:
        problems.append(f"{path}: /offsets: {_more(len(wrong) - SHOWN, 'are empty or out of order')}")
    if rows is not None and offsets[-1] != rows:
        problems.append(f"{path}: /offsets ends at {int(offsets[-1])} but /X has {rows} rows; "
                        "it must end at the number of instances")
    return problems


def _read_meta_v2(path: str, f, version: int = 2) -> TaskMeta:
    found, problems = _v2_datasets(path, f, sparse=version == SPARSE_VERSION)
    X, y, rows = found.get("X"), found.get("y"), None
    sparse, dim = None, None
    if X is not None and version == SPARSE_VERSION:
        sparse = _sparse_shape(path, X, problems)
        if sparse is not None:
            rows, dim = sparse[0], sparse[1]
    elif X is not None:
        dim = int(X.shape[1]) if X.ndim == 2 else None
        if X.ndim != 2:
            problems.append(f"{path}: X must be 2-D (samples x features), got shape {X.shape}")
        elif X.shape[1] == 0:
            problems.append(f"{path}: X has no feature column (shape {X.shape})")
        else:
            rows = int(X.shape[0])
        if X.dtype.kind not in "fiu":
            problems.append(f"{path}: X must be numeric, got dtype {X.dtype}")
    if y is not None:
        if y.ndim != 1:
            problems.append(f"{path}: y must be 1-D, got shape {y.shape}")
        elif rows is not None and y.shape[0] != rows:
            problems.append(f"{path}: {rows} feature rows but {y.shape[0]} labels")
        if y.dtype.kind not in "fiu":
            problems.append(f"{path}: y must be numeric, got dtype {y.dtype}")
    offsets = None
    if "offsets" in found:
        offsets = _index_values(path, found["offsets"], "offsets", problems)
    names = _decoded_names(path, found, None if offsets is None else len(offsets) - 1, problems)
    if offsets is not None:
        problems += _offset_problems(path, offsets, names, rows)
    if problems:
        raise DataError("\n".join(problems))
    return TaskMeta(path=path, names=tuple(names), lengths=np.diff(offsets), dim=dim,
                    version=version, offsets=offsets, nnz=None if sparse is None else sparse[2],
                    max_row_nnz=dim if sparse is None else sparse[3], **_described(f))


def _task_groups(path: str, f) -> tuple:
    """The /tasks group, its task groups' names by index (0..K-1, no gaps) and the lines
    about entries that are not task groups. Raises DataError where no task can be read."""
    why = _link_problem(f, f, "tasks") if _has(f, "tasks") else None
    if why is not None:
        raise DataError(f"{path}: /tasks {why}")
    if "tasks" not in f or not isinstance(f["tasks"], h5py.Group):
        raise DataError(f"{path}: no /tasks group; this is not an omtl-mpi task-stream file "
                        "(convert it with 'omtl-mpi data import')")
    groups = f["tasks"]
    problems = []
    indices = {}
    for key in groups.keys():
        if key.isdigit():
            indices[int(key)] = key
        else:
            problems.append(f"{path}: unexpected entry /tasks/{key}; task groups are named 0000, 0001, ...")
    if not indices and not problems:
        raise DataError(f"{path}: /tasks holds no task groups")
    K = max(indices) + 1 if indices else 0
    if len(indices) < K:
        # one line, not one per gap: a group named 99999999 would otherwise give millions
        gaps = K - len(indices)
        first = next(k for k in range(K) if k not in indices)
        raise DataError("\n".join(problems + [
            f"{path}: task group /tasks/{first:04d} is missing"
            f"{f' (and {gaps - 1} more)' if gaps > 1 else ''}; groups must be numbered "
            f"0..{K - 1} without gaps"]))
    return groups, indices, problems


def _task_structure(path: str, f, groups, key: str, k: int) -> tuple:
    """Task ``k``'s (group ``key``) name, stream length (0 if unreadable), feature count (None
    where X is not 2-D) and the lines about what is wrong with its structure."""
    why = _link_problem(f, groups, key)
    if why is not None:
        return f"task{k}", 0, None, [f"{path}: task {k}: /tasks/{key} {why}"]
    g = groups[key]
    name = g.attrs.get("name", f"task{k}")
    name = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
    where = f"{path}: {_label(k, name)}"
    links = [f"{where}: {ds} {why}" for ds in ("X", "y")     # links that cannot be followed
             if (why := _link_problem(f, g, ds) if _has(g, ds) else None) is not None]
    if links:
        return name, 0, None, links
    if not isinstance(g, h5py.Group) or "X" not in g or "y" not in g:
        return name, 0, None, [f"{where}: missing dataset X or y"]
    X, y = g["X"], g["y"]
    if not (isinstance(X, h5py.Dataset) and isinstance(y, h5py.Dataset)):
        return name, 0, None, [f"{where}: X and y must be datasets (arrays), not groups"]
    problems = []
    if X.ndim != 2:
        problems.append(f"{where}: X must be 2-D (samples x features), got shape {X.shape}")
    if y.ndim != 1:
        problems.append(f"{where}: y must be 1-D, got shape {y.shape}")
    for ds, label in ((X, "X"), (y, "y")):
        if ds.dtype.kind not in "fiub":
            problems.append(f"{where}: {label} must be numeric, got dtype {ds.dtype}")
    if X.ndim == 2 and y.ndim == 1 and X.shape[0] != y.shape[0]:
        problems.append(f"{where}: {X.shape[0]} feature rows but {y.shape[0]} labels")
    # A scalar X has no rows; its shape problem is already reported above.
    rows = int(X.shape[0]) if X.ndim else 0
    if X.ndim and rows == 0:
        problems.append(f"{where}: the task is empty (no samples)")
    return name, rows, (X.shape[1] if X.ndim == 2 else None), problems
