"""The package's import graph keeps its layers (docs/DESIGN.md, "Layers"): each layer imports
only from the layers below it, and the speed plug-in (omtl_mpi/fast) only from the runtime.

Every import counts, also those inside functions (the package imports lazily for start-up time).
"""
import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "omtl_mpi"

# lower number = lower layer; a module may import its own layer's modules and lower ones (the
# package's __init__ names the public API, resolved on first use through importlib, which this
# checker does not follow: tests/test_api.py checks that importing it loads nothing)
LAYERS = {
    "__main__": 7, "cli": 6,
    "learners": 5.5, "streams": 5.5, "checks": 5.5, "persist": 5.5, "text": 5.5,  # the Python API
    "sklearn": 5.5,                 # the Python API as a scikit-learn estimator
    "sweep": 5, "report": 5,
    "runtime": 4,
    "engine": 3.75,                 # placement, a rank's roles and their rounds, under every run
    "fast": 3.5,                    # the plug-in: between the runtime and what it speeds up
    "comm": 3,
    "options": 2.5, "config": 2.5,  # one description of a run, read by every layer above
    "algorithms": 2,
    "data": 1, "topology": 1,
    "metrics": 0, "errors": 0, "atomic": 0, "paths": 0, "__init__": 0, "threads": 0, "memory": 0,
}


def _component(module: str) -> str:
    """``omtl_mpi.runtime.run`` -> ``runtime``; ``omtl_mpi`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: pathlib.Path) -> set[str]:
    """Every omtl_mpi module ``path`` imports, as absolute names."""
    # the package a relative import starts from: the module's folder (an __init__'s too)
    package = list(path.relative_to(PACKAGE.parent).parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "omtl_mpi")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if name.split(".")[0] == "omtl_mpi":
                # "from . import fast" names the module fast
                subs = [f"{name}.{a.name}" for a in node.names]
                found.update(s for s in subs if (PACKAGE.parent / s.replace(".", "/")).exists()
                             or (PACKAGE.parent / (s.replace(".", "/") + ".py")).exists())
                if not any(s in found for s in subs):
                    found.add(name)
    return found


def _graph() -> dict[str, set[str]]:
    graph = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        graph[name] = _imports(path)
    return graph


def test_every_component_has_a_layer():
    assert {_component(m) for m in _graph()} <= set(LAYERS)


def test_layers_import_only_downwards():
    wrong = []
    for module, imported in _graph().items():
        mine = _component(module)
        for other in imported:
            theirs = _component(other)
            if LAYERS[theirs] > LAYERS[mine]:
                wrong.append(f"{module} imports {other}")
    assert not wrong, "\n".join(wrong)


def test_only_the_runtime_imports_the_plug_in():
    users = {m for m, imported in _graph().items()
             if _component(m) not in ("fast", "runtime") and any(_component(i) == "fast" for i in imported)}
    assert not users


def test_only_the_entry_point_imports_the_command_line():
    users = {m for m, imported in _graph().items()
             if _component(m) not in ("cli", "__main__") and any(_component(i) == "cli" for i in imported)}
    assert not users


def test_no_numba_anywhere():
    """The compiled steps were removed (they no longer served the default path)."""
    assert not [p for p in PACKAGE.rglob("*.py") if "import numba" in p.read_text()]


def test_the_checker_sees_imports():
    """The checks above would pass on a parser that finds nothing."""
    graph = _graph()
    assert "omtl_mpi.comm.mpi" in graph["omtl_mpi.engine.roles"]      # a lazy import
    assert "omtl_mpi.algorithms.experts" in graph["omtl_mpi.algorithms.admm"]
    assert "omtl_mpi.runtime.run" in graph["omtl_mpi.cli.run"]          # a lazy import, in a function


def test_a_learners_facts_are_on_its_registry_entry():
    """No layer above the algorithms asks which learner it has by name (``cfg.algo ==``): what
    differs from learner to learner (its class, its memory and the advice when it does not fit)
    is on its entry; every built-in learner has a public class of that name."""
    import re

    import omtl_mpi
    from omtl_mpi.algorithms import registry
    asks = re.compile(r"\balgo\s*(==|!=|in\s*[(\[{])")
    above = [*(PACKAGE / "runtime").rglob("*.py"), *(PACKAGE / "cli").rglob("*.py"),
             *(PACKAGE / "learners").rglob("*.py"),
             PACKAGE / "streams.py"]
    found = [f"{path.relative_to(PACKAGE)}:{n}" for path in above
             for n, line in enumerate(path.read_text().splitlines(), 1) if asks.search(line)]
    assert found == []
    built_in = {name: spec for name, spec in registry.REGISTRY.items()   # not the tests' toys
                if (spec.worker or spec.node).__module__.startswith("omtl_mpi.")}
    assert len(built_in) == 12
    for name, spec in built_in.items():
        assert spec.class_name and getattr(omtl_mpi, spec.class_name).algo == name, name


def test_one_function_places_the_tasks():
    """Which tasks a rank holds is engine.placement.placement's answer everywhere (the runtime,
    the Python API's learners, the tests' driver); a d-admm node knows the other nodes' blocks
    by the contract's same rule (task_blocks)."""
    calls = {str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
             if "task_blocks(" in path.read_text().replace("def task_blocks(", "")}
    assert calls == {"engine/placement.py", "algorithms/dadmm.py", "algorithms/contract.py"}
    placed = {str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
              if "placement(" in path.read_text().replace("def placement(", "")}
    assert placed <= {"engine/roles.py", "runtime/run.py"}, placed   # run.py: its memory check


def test_one_place_makes_a_ranks_roles():
    """The engine (engine.build) is the one maker of role objects and of the Engine itself:
    ``omtl-mpi run``, the learner objects and the tests' driver all ask it."""
    import re
    makes = re.compile(r"\b(Engine|\w+\.(worker|server|node))\(")
    found = {str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
             if any(makes.search(line) and not line.lstrip().startswith(("def ", "class "))
                    for line in path.read_text().splitlines())}
    assert found == {"engine/roles.py"}
    graph = _graph()
    assert "omtl_mpi.engine" in graph["omtl_mpi.learners.build"] & graph["omtl_mpi.runtime.run"]
