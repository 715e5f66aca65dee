"""Importers from other formats into the task-stream format (each writes atomically)."""
from .npz import import_npz
from .real import import_landmine, import_mnist
from .tabular import import_csv, import_libsvm, import_vw
from .text import import_text_csv, import_tweeteval
from .tudataset import import_tudataset

__all__ = ["import_npz", "import_landmine", "import_mnist", "import_tweeteval",
           "import_text_csv", "import_tudataset", "import_csv", "import_libsvm", "import_vw"]
