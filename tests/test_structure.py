"""The package's structure: no import cycle, an engine that reads no source, short functions,
citations that stay inside the repository, and a design page that names every module.

Each check is a function over source text, tested twice: on the repository (the real check) and on a
small counter-example that must fail it (so the check itself is shown able to fail).
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Source folder -> the import name it ships as (pyproject's package-dir maps integrations/).
PACKAGES = {
    "transfersearch": "transfersearch",
    "integrations": "transfersearch.integrations",
    "transfersearch_demo": "transfersearch_demo",
}

#: The most lines of code a function may have (blank, comment and docstring lines not counted).
MAX_FUNCTION_LINES = 60

#: The fitting engine's package: it composes forward, lies on no import cycle of any kind and
#: renders no text of several lines (docs/design.md, "The boundary").
FITTING = "transfersearch.fitting"

#: What the fitting engine must not import: the boundary, the readers and every framework.
ENGINE_FORBIDDEN_MODULES = (
    "transfersearch.stored_space",
    "transfersearch.readers",
    "transfersearch.api",
    "transfersearch.integrations",
    "optuna",
    "ray",
    "torch",
)
#: Reader functions, wherever they live: the engine takes a Sweep, it does not read one.
ENGINE_FORBIDDEN_NAMES = re.compile(
    r"^(as_observations|read_sweep|register_reader|stored_space|observations_from_\w+)$"
)

#: Citations of files outside the repository (the science and style notes, the shared folder, absolute paths).
#: A benchmark's input data named by its relative path (``--data ../shared/data/x.csv``, or the
#: folder, ``--data-dir ../shared/data``) is not a citation: it is how the benchmarks take their
#: data (README, "Benchmarks").
OUTSIDE_CITATION = re.compile(
    r"\b(?:SCIENCE|STYLE)\.md\b|\.\./shared\b(?!/data(?:/[\w.-]+\.csv)?(?![\w/.]))"
    r"|(?<![\w.~-])/(?:work|home|Users|root)/"
)
#: "docs/science.md §7.1", "docs/science.md §7.1, §7.3", "docs/science.md §7.1-7.5".
SCIENCE_CITATION = re.compile(
    r"docs/science\.md,?\s*(§+\s*\d+(?:\.\d+)*"
    r"(?:(?:\s*[-–]\s*§*|\s*(?:,|and|or)\s*§+)\s*\d+(?:\.\d+)*)*)"
)


# --------------------------------------------------------------------------------------------- sources


def repository_modules() -> dict[str, Path]:
    """Import name -> file, for every module of the shipped packages."""
    modules: dict[str, Path] = {}
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((package, *parts))] = path
    return modules


def repository_python_files() -> list[Path]:
    """Every Python file git tracks (plus the shipped packages' untracked new modules)."""
    listed = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    files = {ROOT / name for name in listed} | set(repository_modules().values())
    return sorted(path for path in files if path.exists())


def read_sources(modules: Mapping[str, Path]) -> dict[str, str]:
    return {name: path.read_text(encoding="utf-8") for name, path in modules.items()}


def _is_package(name: str, modules: Mapping[str, Path]) -> bool:
    return modules[name].name == "__init__.py" if name in modules else False


# --------------------------------------------------------------------------------------------- imports


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_time_statements(body: Iterable[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements that run when the module is imported: not inside a function, nor under
    ``if TYPE_CHECKING:`` (class bodies, ``try`` and ordinary ``if`` blocks do run)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from import_time_statements(node.orelse)
        else:
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                for child in getattr(node, field, []):
                    if isinstance(child, ast.stmt):
                        yield from import_time_statements([child])
                    elif hasattr(child, "body"):  # except handlers, match cases
                        yield from import_time_statements(child.body)


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imported_modules(
    node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: Iterable[str]
) -> list[str]:
    """The modules an import statement loads: ``import a.b`` names a.b; ``from a import b`` names
    the submodule a.b when there is one, else a (whose namespace must be ready)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    source = _absolute(node, module, is_package)
    known = set(known)
    out = []
    for alias in node.names:
        sub = f"{source}.{alias.name}"
        out.append(sub if sub in known else source)
    return out


def every_import(body: Iterable[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, wherever it is: under ``if TYPE_CHECKING:`` and inside functions
    too (the imports a reader of the module, or a type checker, follows)."""
    for statement in body:
        for node in ast.walk(statement):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                yield node


def import_graph(
    sources: Mapping[str, str],
    packages: Iterable[str] = (),
    statements: Callable[[Iterable[ast.stmt]], Iterator[ast.Import | ast.ImportFrom]] = (
        import_time_statements
    ),
) -> dict[str, set[str]]:
    """Module -> the modules among ``sources`` it imports at import time (or by ``statements``:
    :func:`every_import` counts type-only and function-local imports too)."""
    packages = set(packages)
    graph: dict[str, set[str]] = {}
    for module, text in sources.items():
        tree = ast.parse(text)
        edges: set[str] = set()
        for node in statements(tree.body):
            for name in imported_modules(node, module, module in packages, sources):
                if name in sources and name != module:
                    edges.add(name)
        graph[module] = edges
    return graph


def import_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """One cycle path (first module repeated at the end) per strongly connected group of modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def connect(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return [_cycle_path(graph, set(group)) for group in groups]


def _cycle_path(graph: Mapping[str, set[str]], group: set[str]) -> list[str]:
    """A shortest path from the group's first module back to itself, inside the group."""
    start = min(group)
    path = cycle_back({node: graph[node] & group for node in group}, start)
    if not path:
        raise AssertionError(f"no cycle through {start} in {sorted(group)}")
    return path


def cycle_back(graph: Mapping[str, set[str]], start: str) -> list[str]:
    """A shortest import path from ``start`` back to itself (first module repeated at the end), or
    [] when ``start`` lies on no cycle."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph.get(node, ())):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start] if node != start else [start, start]
                if nxt not in previous:
                    previous[nxt] = node
                    following.append(nxt)
        frontier = following
    return []


def _repository_graph() -> dict[str, set[str]]:
    modules = repository_modules()
    packages = [name for name in modules if _is_package(name, modules)]
    return import_graph(read_sources(modules), packages)


def test_no_import_cycle() -> None:
    cycles = import_cycles(_repository_graph())
    assert not cycles, "import cycles at import time:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_import_cycle_check_finds_a_cycle() -> None:
    sources = {
        "pkg": "",
        "pkg.a": "from pkg import b\n",
        "pkg.b": "from pkg.c import thing\n",
        "pkg.c": "import pkg.a\n",
        "pkg.d": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n",
        "pkg.e": "def f():\n    from pkg import a\n",
    }
    graph = import_graph(sources, packages=["pkg"])
    assert import_cycles(graph) == [["pkg.a", "pkg.b", "pkg.c", "pkg.a"]]
    # imports under TYPE_CHECKING or inside a function do not run at import time
    sources["pkg.a"] = "if TYPE_CHECKING:\n    from pkg import b\ndef g():\n    import pkg.b\n"
    assert import_cycles(import_graph(sources, packages=["pkg"])) == []
    # a relative import inside a class body or try block runs at import time
    sources["pkg.a"] = (
        "class K:\n    try:\n        from . import b\n    except ImportError:\n        pass\n"
    )
    assert import_cycles(import_graph(sources, packages=["pkg"])) == [
        ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]
    ]


def _fitting_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    return [
        path
        for name in sorted(graph)
        if name.startswith(FITTING)
        if (path := cycle_back(graph, name))
    ]


def test_fitting_lies_on_no_cycle_of_any_import() -> None:
    """The engine composes forward (docs/design.md, "The boundary"): no module of fitting/ reaches
    itself again, counting the imports under TYPE_CHECKING and inside functions."""
    modules = repository_modules()
    packages = [name for name in modules if _is_package(name, modules)]
    graph = import_graph(read_sources(modules), packages, statements=every_import)
    cycles = _fitting_cycles(graph)
    assert not cycles, "fitting/ lies on import cycles:\n" + "\n".join(
        " -> ".join(c) for c in cycles
    )


def test_fitting_cycle_check_counts_type_only_and_local_imports() -> None:
    sources = {
        "transfersearch.fitting.result": "def f():\n    from transfersearch import text\n",
        "transfersearch.text": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from transfersearch.fitting.result import R\n"
        ),
        "transfersearch.fitting.engine": "import transfersearch.fitting.result\n",
    }
    assert import_cycles(import_graph(sources)) == []  # none runs at import time
    graph = import_graph(sources, statements=every_import)
    assert _fitting_cycles(graph) == [
        ["transfersearch.fitting.result", "transfersearch.text", "transfersearch.fitting.result"]
    ]
    sources["transfersearch.text"] = "from typing import Protocol\n"
    assert _fitting_cycles(import_graph(sources, statements=every_import)) == []


# --------------------------------------------------------------------------------------------- engine


def _forbidden_module(name: str) -> str | None:
    for bad in ENGINE_FORBIDDEN_MODULES:
        if name == bad or name.startswith(bad + "."):
            return bad
    return None


def engine_source_reads(
    module: str, text: str, is_package: bool, known: Iterable[str]
) -> list[str]:
    """What a module of the engine imports that reads a source: the boundary's modules, the readers
    (by name, wherever they are imported from or reached as an attribute) or a framework. Counted
    everywhere (inside functions and under TYPE_CHECKING too)."""
    known = set(known)
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            targets = imported_modules(node, module, is_package, known)
            if isinstance(node, ast.ImportFrom):
                targets.append(_absolute(node, module, is_package))
            for name in sorted(set(targets)):
                bad = _forbidden_module(name)
                if bad:
                    found.append((node.lineno, f"imports {name}"))
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if ENGINE_FORBIDDEN_NAMES.match(alias.name):
                        found.append((node.lineno, f"imports the reader {alias.name}"))
        elif isinstance(node, ast.Attribute) and ENGINE_FORBIDDEN_NAMES.match(node.attr):
            found.append((node.lineno, f"uses the reader .{node.attr}"))
    found.sort(key=lambda item: item[0])
    return [f"{module}:{line} {what}" for line, what in found]


def engine_reaches(graph: Mapping[str, set[str]], engine: Iterable[str]) -> list[str]:
    """Forbidden modules the engine loads through other modules at import time, each with its
    shortest path from an engine module."""
    previous: dict[str, str | None] = {start: None for start in engine}
    frontier = sorted(previous)
    found = []
    while frontier:
        node = frontier.pop(0)
        for nxt in sorted(graph.get(node, ())):
            if nxt in previous:
                continue
            previous[nxt] = node
            if _forbidden_module(nxt):
                path = [nxt]
                while (before := previous[path[-1]]) is not None:
                    path.append(before)
                found.append(" -> ".join(reversed(path)))
            else:
                frontier.append(nxt)
    return found


def test_fitting_reads_no_source() -> None:
    modules = repository_modules()
    sources = read_sources(modules)
    engine = [name for name in modules if name.startswith("transfersearch.fitting")]
    assert "transfersearch.fitting" in engine and len(engine) > 5
    found = []
    for name in engine:
        found += engine_source_reads(name, sources[name], _is_package(name, modules), sources)
    found += engine_reaches(_repository_graph(), engine)
    assert not found, "the fitting engine reads sources:\n" + "\n".join(found)


def test_source_read_check_finds_reads() -> None:
    known = {
        "transfersearch.observations",
        "transfersearch.fitting.engine",
        "transfersearch.readers",
    }
    text = (
        "from transfersearch.observations import Observation, as_observations\n"
        "from ..stored_space import stored_space\n"
        "def f(x):\n"
        "    import optuna.trial\n"
        "    from transfersearch import readers\n"
        "    return readers.read_sweep(x)\n"
    )
    found = engine_source_reads("transfersearch.fitting.engine", text, False, known)
    assert found == [
        "transfersearch.fitting.engine:1 imports the reader as_observations",
        "transfersearch.fitting.engine:2 imports transfersearch.stored_space",
        "transfersearch.fitting.engine:2 imports the reader stored_space",
        "transfersearch.fitting.engine:4 imports optuna.trial",
        "transfersearch.fitting.engine:5 imports transfersearch.readers",
        "transfersearch.fitting.engine:6 uses the reader .read_sweep",
    ]
    clean = "from transfersearch.observations import Observation\nimport numpy as np\n"
    assert engine_source_reads("transfersearch.fitting.engine", clean, False, known) == []
    graph = {
        "transfersearch.fitting.engine": {"transfersearch.observations"},
        "transfersearch.observations": {"transfersearch.stored_space"},
        "transfersearch.stored_space": set(),
    }
    assert engine_reaches(graph, ["transfersearch.fitting.engine"]) == [
        "transfersearch.fitting.engine -> transfersearch.observations -> transfersearch.stored_space"
    ]


# --------------------------------------------------------------------------------------------- length


def code_lines(text: str, node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's lines that are not blank, a comment or its docstring (nested functions count in
    the enclosing one too)."""
    lines = text.splitlines()[node.lineno - 1 : node.end_lineno]
    skip: set[int] = set()
    if ast.get_docstring(node, clean=False) is not None:
        first = node.body[0]
        skip = set(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return sum(
        1
        for number, line in enumerate(lines, start=node.lineno)
        if number not in skip and line.strip() and not line.strip().startswith("#")
    )


def long_functions(label: str, text: str, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            count = code_lines(text, node)
            if count > limit:
                found.append(f"{label}:{node.lineno} {node.name} has {count} lines of code")
    return found


def test_no_function_over_60_lines_of_code() -> None:
    found = []
    for path in repository_modules().values():
        found += long_functions(str(path.relative_to(ROOT)), path.read_text(encoding="utf-8"))
    assert not found, f"functions over {MAX_FUNCTION_LINES} lines of code:\n" + "\n".join(found)


def _function(code_count: int) -> str:
    body = "\n".join(f"    x{i} = {i}  # set" for i in range(code_count - 2))
    return (
        "def f():\n"
        '    """A docstring\n\n    over lines that do not count.\n    """\n'
        "    # a comment\n\n"
        f"{body}\n\n"
        "    return x0\n"
    )


def test_long_function_check_counts_code_only() -> None:
    assert long_functions("m", _function(MAX_FUNCTION_LINES)) == []
    assert long_functions("m", _function(MAX_FUNCTION_LINES + 1)) == [
        f"m:1 f has {MAX_FUNCTION_LINES + 1} lines of code"
    ]


# --------------------------------------------------------------------------------------------- citations


def docstrings_and_comments(text: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every docstring and comment of a module."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            if ast.get_docstring(node, clean=False) is not None:
                first = node.body[0]
                yield first.lineno, ast.get_docstring(node, clean=False) or ""
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def science_sections(markdown: str) -> set[str]:
    """The numbers of docs/science.md's headings: "## 7. Title" -> "7", "### 7.1 Title" -> "7.1"."""
    return set(re.findall(r"^#{2,6}\s+(\d+(?:\.\d+)*)\.?\s", markdown, flags=re.MULTILINE))


def bad_citations(label: str, text: str, sections: set[str]) -> list[str]:
    found = []
    for line, chunk in docstrings_and_comments(text):
        for number, row in enumerate(chunk.splitlines()):
            where = f"{label}:{line + number}"
            for match in OUTSIDE_CITATION.finditer(row):
                found.append(f"{where} cites {match.group(0)!r}, outside the repository")
        for cited in cited_sections(chunk):
            if cited not in sections:
                found.append(
                    f"{label}:{line} cites docs/science.md §{cited}, which has no such section"
                )
    return found


def cited_sections(text: str) -> list[str]:
    """The section numbers ``text`` cites as "docs/science.md §N" (line breaks allowed)."""
    flat = " ".join(text.split())
    return [
        cited
        for match in SCIENCE_CITATION.finditer(flat)
        for cited in re.findall(r"\d+(?:\.\d+)*", match.group(1))
    ]


def test_no_citation_outside_the_repository() -> None:
    sections = science_sections((ROOT / "docs" / "science.md").read_text(encoding="utf-8"))
    assert {"1", "5", "7", "7.1", "8"} <= sections
    found = []
    for path in repository_python_files():
        found += bad_citations(
            str(path.relative_to(ROOT)), path.read_text(encoding="utf-8"), sections
        )
    assert not found, "citations that point nowhere:\n" + "\n".join(found)


def test_pages_cite_existing_science_sections() -> None:
    sections = science_sections((ROOT / "docs" / "science.md").read_text(encoding="utf-8"))
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    missing = [
        f"{page.relative_to(ROOT)} cites docs/science.md §{cited}"
        for page in pages
        for cited in cited_sections(page.read_text(encoding="utf-8"))
        if cited not in sections
    ]
    assert not missing, "citations of sections docs/science.md does not have:\n" + "\n".join(
        missing
    )


def test_citation_check_finds_bad_citations() -> None:
    sections = science_sections("# The science\n## 1. AdamW\n## 7. Laws\n### 7.1 Edges\n")
    assert sections == {"1", "7", "7.1"}
    text = (
        '"""Module (SCIENCE'
        + '.md §7).\n\nSee docs/science.md §7.1, §7.9 and\ndocs/science.md\n§2."""\n'
        "x = 1  # from ../" + "shared/data/README.md, not ../shared/data/steps.csv\n"
        "def f():\n"
        '    """Style: /ho' + 'me/someone/STYLE.md; fine: docs/science.md §1 and §7-7.1."""\n'
    )
    assert bad_citations("m.py", text, sections) == [
        "m.py:1 cites 'SCIENCE.md', outside the repository",
        "m.py:1 cites docs/science.md §7.9, which has no such section",
        "m.py:1 cites docs/science.md §2, which has no such section",
        "m.py:8 cites '/home/', outside the repository",
        "m.py:8 cites 'STYLE.md', outside the repository",
        "m.py:6 cites '../shared', outside the repository",
    ]
    assert bad_citations("m.py", '"""docs/science.md §7.1 and §1."""\n', sections) == []
    assert cited_sections("see docs/science.md §7.1-7.6, and docs/science.md\n§8. §9") == [
        "7.1",
        "7.6",
        "8",
    ]


# --------------------------------------------------------------------------------------------- design


def design_names(module_files: Iterable[Path]) -> dict[str, tuple[str, ...]]:
    """For every module, the spellings that count as naming it in docs/design.md: its path from the
    repository root, its path inside its package folder ("fitting/engine.py") or its import name.
    A package is named by its folder ("fitting/"); a top folder's __init__.py needs no mention."""
    names: dict[str, tuple[str, ...]] = {}
    for path in module_files:
        relative = path.relative_to(ROOT)
        folder, inner = relative.parts[0], Path(*relative.parts[1:])
        if path.name == "__init__.py":
            if inner.parent == Path("."):
                continue
            inner_name = f"{inner.parent.as_posix()}/"
            dotted = ".".join((PACKAGES[folder], *inner.parent.parts))
            names[relative.parent.as_posix() + "/"] = (f"{folder}/{inner_name}", inner_name, dotted)
        else:
            dotted = ".".join((PACKAGES[folder], *inner.with_suffix("").parts))
            names[relative.as_posix()] = (relative.as_posix(), inner.as_posix(), dotted)
    return names


def unnamed_modules(design: str, names: Mapping[str, tuple[str, ...]]) -> list[str]:
    def named(spelling: str) -> bool:
        return re.search(rf"(?<![\w/.]){re.escape(spelling)}(?![\w])", design) is not None

    return sorted(module for module, spellings in names.items() if not any(map(named, spellings)))


def test_design_names_every_module() -> None:
    modules = list(repository_modules().values())
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    missing = unnamed_modules(design, design_names(modules))
    assert not missing, "docs/design.md does not name these modules:\n" + "\n".join(missing)


def stale_names(design: str, files: Iterable[str]) -> list[str]:
    """The Python files ``design`` names (``x.py``, ``fitting/x.py``, ``tests/x.py``) that no file
    of the repository is, so that the page cannot keep a module that went."""
    files = list(files)
    named = sorted(set(re.findall(r"(?<![\w./-])([\w./-]*\w\.py)\b", design)))
    return [name for name in named if not any(f == name or f.endswith("/" + name) for f in files)]


def test_design_names_no_module_that_went() -> None:
    files = [str(path.relative_to(ROOT).as_posix()) for path in repository_python_files()]
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    stale = stale_names(design, files)
    assert not stale, "docs/design.md names files that do not exist:\n" + "\n".join(stale)


def test_design_check_finds_unnamed_modules() -> None:
    files = [
        ROOT / "transfersearch" / "__init__.py",
        ROOT / "transfersearch" / "scale.py",
        ROOT / "transfersearch" / "fitting" / "__init__.py",
        ROOT / "transfersearch" / "fitting" / "engine.py",
        ROOT / "transfersearch" / "fitting" / "local.py",
        ROOT / "integrations" / "_torch_groups.py",
    ]
    names = design_names(files)
    design = "  scale.py   Scale\n  fitting/   the engine\n    fitting/engine.py\n"
    assert unnamed_modules(design, names) == [
        "integrations/_torch_groups.py",
        "transfersearch/fitting/local.py",
    ]
    design += "transfersearch.fitting.local; integrations/_torch_groups.py\n"
    assert unnamed_modules(design, names) == []
    # "fitting/local.py" does not name "local.py" of another folder, nor "scale.py" "myscale.py"
    assert unnamed_modules("myscale.py other/fitting/engine.py", names) == sorted(names)
    tracked = ["transfersearch/fitting/engine.py", "integrations/optuna.py", "tests/test_api.py"]
    design = (
        "engine.py, fitting/engine.py, optuna.py, tests/test_api.py; fitting/api.py, extrapolate.py"
    )
    assert stale_names(design, tracked) == ["extrapolate.py", "fitting/api.py"]


# --------------------------------------------------------------------------------------------- layers

#: Core modules that may import an adapter, and only inside a function: the CLI's ``--storage``
#: (integrations.optuna) and ``--publish`` (integrations.dashboard), so ``--help`` loads no framework.
CORE_LAZY_ADAPTER_IMPORTS = ("transfersearch.cli",)
#: The adapters: the core reaches them through entry points, never by importing them.
ADAPTER_PACKAGES = ("transfersearch.integrations", "transfersearch_demo")


def _statements_at_import_time(tree: ast.Module) -> set[int]:
    return {id(node) for node in import_time_statements(tree.body)}


def adapter_imports(
    module: str, text: str, is_package: bool, known: Iterable[str]
) -> list[tuple[int, str, bool]]:
    """(line, adapter module, at import time?) for each import of an adapter by ``module``,
    inside functions and under TYPE_CHECKING too."""
    tree = ast.parse(text)
    eager = _statements_at_import_time(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            targets = set(imported_modules(node, module, is_package, known))
            if isinstance(node, ast.ImportFrom):
                targets.add(_absolute(node, module, is_package))
            for name in sorted(targets):
                if any(name == a or name.startswith(a + ".") for a in ADAPTER_PACKAGES):
                    found.append((node.lineno, name, id(node) in eager))
    return sorted(set(found))


def core_adapter_imports(
    sources: Mapping[str, str], packages: Iterable[str], allowed_lazy: Iterable[str]
) -> list[str]:
    """The core's imports of an adapter that break the layering: any at import time, and any
    inside a function of a module not in ``allowed_lazy``."""
    packages, allowed_lazy = set(packages), set(allowed_lazy)
    found = []
    for module, text in sorted(sources.items()):
        if any(module == a or module.startswith(a + ".") for a in ADAPTER_PACKAGES):
            continue
        for line, name, eager in adapter_imports(module, text, module in packages, sources):
            if eager or module not in allowed_lazy:
                found.append(f"{module}:{line} imports {name}{' at import time' if eager else ''}")
    return found


def test_the_core_imports_no_adapter_but_the_clis_lazy_ones() -> None:
    modules = repository_modules()
    sources = read_sources(modules)
    packages = [name for name in modules if _is_package(name, modules)]
    found = core_adapter_imports(sources, packages, CORE_LAZY_ADAPTER_IMPORTS)
    assert not found, "the core imports adapters (docs/design.md, Layout):\n" + "\n".join(found)
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    for module in CORE_LAZY_ADAPTER_IMPORTS:  # the page names each exception
        assert f"`{module.rsplit('.', 1)[-1]}.py`" in design


def test_adapter_import_check_finds_imports() -> None:
    sources = {
        "transfersearch": "",
        "transfersearch.cli": "def f():\n    from transfersearch.integrations.optuna import x\n",
        "transfersearch.api": "from transfersearch.integrations import optuna\n",
        "transfersearch.report": "def g():\n    import transfersearch_demo.app\n",
        "transfersearch.integrations": "",
        "transfersearch.integrations.optuna": "import transfersearch.api\n",
    }
    found = core_adapter_imports(sources, ["transfersearch", "transfersearch.integrations"], [])
    assert found == [
        "transfersearch.api:1 imports transfersearch.integrations at import time",
        "transfersearch.api:1 imports transfersearch.integrations.optuna at import time",
        "transfersearch.cli:2 imports transfersearch.integrations.optuna",
        "transfersearch.report:2 imports transfersearch_demo.app",
    ]
    allowed = ["transfersearch.cli", "transfersearch.report"]
    assert core_adapter_imports(sources, ["transfersearch"], allowed) == found[:2]


#: Modules of the engine that may warn, each about what its caller passed (docs/design.md, "The
#: boundary"): FitOptions on a deprecated argument. Every other finding is a Diagnostic record.
ENGINE_WARNING_MODULES = ("transfersearch.fitting.options",)


def warning_calls(text: str) -> list[int]:
    """The lines that call ``warnings.warn`` (or ``warn`` imported from ``warnings``)."""
    tree = ast.parse(text)
    bare = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "warnings"
        for alias in node.names
        if alias.name == "warn"
    }
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (
            (
                isinstance(node.func, ast.Attribute)
                and node.func.attr == "warn"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "warnings"
            )
            or (isinstance(node.func, ast.Name) and node.func.id in bare)
        )
    )


def test_the_engine_warns_only_where_the_design_says() -> None:
    sources = read_sources(repository_modules())
    found = [
        f"{module}:{line}"
        for module, text in sorted(sources.items())
        if module.startswith("transfersearch.fitting") and module not in ENGINE_WARNING_MODULES
        for line in warning_calls(text)
    ]
    assert not found, "the engine warns (return a Diagnostic instead):\n" + "\n".join(found)


def test_warning_check_finds_calls() -> None:
    text = (
        "import warnings\nfrom warnings import warn as w\n"
        "def f():\n    warnings.warn('x')\n    w('y')\n    log.warn('z')\n"
    )
    assert warning_calls(text) == [4, 5]
    assert warning_calls("def f():\n    return 1\n") == []


def newline_joins(text: str) -> list[int]:
    """The lines that join strings with a newline (``"\\n".join(lines)``): where a text of several
    lines, a summary or a table, is built."""
    return sorted(
        node.lineno
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "join"
        and isinstance(node.func.value, ast.Constant)
        and isinstance(node.func.value.value, str)
        and "\n" in node.func.value.value
    )


def test_the_engine_renders_no_summary_text() -> None:
    """fitting/ returns records and numbers; the text of ``summary()`` is built outside it
    (transfersearch/_summary_text.py), as the tables and figures are."""
    sources = read_sources(repository_modules())
    found = [
        f"{module}:{line}"
        for module, text in sorted(sources.items())
        if module.startswith(FITTING)
        for line in newline_joins(text)
    ]
    assert not found, "the engine builds text (render it outside fitting/):\n" + "\n".join(found)


def test_newline_join_check_finds_joins() -> None:
    text = (
        "def f(lines):\n    a = '\\n'.join(lines)\n    b = ', '.join(lines)\n"
        "    return a + '\\n\\n'.join(b) + sep.join(lines)\n"
    )
    assert newline_joins(text) == [2, 4]
    assert newline_joins("def f(x):\n    return ', '.join(x)\n") == []


# --------------------------------------------------------------------------------------------- house


def python_floors(pyproject: str) -> dict[str, str]:
    """The lowest Python each tool is told about: requires-python, ruff's target, mypy's version."""
    found = {
        "requires-python": re.search(r'^requires-python\s*=\s*">=\s*(3\.\d+)"', pyproject, re.M),
        "ruff target-version": re.search(r'^target-version\s*=\s*"py3(\d+)"', pyproject, re.M),
        "mypy python_version": re.search(r'^python_version\s*=\s*"(3\.\d+)"', pyproject, re.M),
    }
    out = {name: match.group(1) if match else "missing" for name, match in found.items()}
    if out["ruff target-version"] != "missing":
        out["ruff target-version"] = f"3.{out['ruff target-version']}"
    return out


def test_one_python_floor() -> None:
    floors = python_floors((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert set(floors.values()) == {"3.11"}, floors


def test_python_floor_check_finds_a_mismatch() -> None:
    text = 'requires-python = ">=3.10"\ntarget-version = "py311"\npython_version = "3.11"\n'
    assert python_floors(text) == {
        "requires-python": "3.10",
        "ruff target-version": "3.11",
        "mypy python_version": "3.11",
    }
    assert python_floors("")["requires-python"] == "missing"


def test_pages_and_config_cite_nothing_outside_the_repository() -> None:
    files = [ROOT / "README.md", ROOT / "pyproject.toml", ROOT / "mkdocs.yml"]
    files += sorted((ROOT / "docs").rglob("*.md"))
    found = [
        f"{path.relative_to(ROOT)}:{number} cites {match.group(0)!r}"
        for path in files
        for number, row in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        for match in OUTSIDE_CITATION.finditer(row)
    ]
    assert not found, "citations outside the repository:\n" + "\n".join(found)
    assert (ROOT / "docs" / "contributing.md").is_file(), "the style guide lives in the repository"


def nav_pages(mkdocs: str) -> set[str]:
    """The pages mkdocs.yml's nav lists (``- Title: page.md``)."""
    return set(re.findall(r"^\s*-\s*[^:\n]+:\s*([\w./-]+\.md)\s*$", mkdocs, flags=re.M))


def test_every_docs_page_is_in_the_nav() -> None:
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    listed = nav_pages((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert pages - listed == set(), f"docs pages missing from mkdocs.yml's nav: {pages - listed}"
    assert listed - pages == set(), f"mkdocs.yml's nav lists missing pages: {listed - pages}"


def test_nav_check_reads_the_pages() -> None:
    mkdocs = "nav:\n  - Home: index.md\n  - Parts:\n      - Optuna: integrations/optuna.md\n"
    assert nav_pages(mkdocs) == {"index.md", "integrations/optuna.md"}
