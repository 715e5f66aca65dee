"""Task streams: the HDF5 format, validation, the synthetic generator and importers."""
from .importers import import_npz, info
from .source import FileSource, SyntheticSource
from .synthetic import generate
from .taskfile import TaskMeta, TaskStreams, load_tasks, read_meta, write_tasks

__all__ = ["write_tasks", "read_meta", "load_tasks", "TaskMeta", "TaskStreams", "FileSource",
           "SyntheticSource", "generate", "import_npz", "info"]
