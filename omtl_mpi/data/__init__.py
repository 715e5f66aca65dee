"""Task streams: the HDF5 format, validation, the synthetic generator and importers."""
from .importers import (import_csv, import_landmine, import_libsvm, import_mnist, import_npz,
                        import_text_csv, import_tudataset, import_tweeteval, import_vw)
from .source import FileSource, SyntheticSource
from .synthetic import generate
# info reads labels through taskfile's checks (a damaged task is one line naming it)
from .taskfile import (FlatStreams, TaskFileWriter, TaskMeta, TaskStreams, info, load_block,
                       load_tasks, read_meta, write_tasks)

__all__ = ["write_tasks", "TaskFileWriter", "read_meta", "load_tasks", "load_block", "TaskMeta",
           "TaskStreams", "FlatStreams", "FileSource",
           "SyntheticSource", "generate", "import_npz", "import_landmine", "import_mnist",
           "import_tweeteval", "import_text_csv", "import_tudataset", "import_csv", "import_libsvm",
           "import_vw", "info"]
