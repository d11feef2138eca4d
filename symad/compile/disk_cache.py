"""Generated modules kept on disk, so that another process's first call skips lowering.

An entry is keyed by a hash of the graph's canonical form (:func:`canonical_form`),
the backend, the dtype, the names written into the module's comments, and a
fingerprint of symad (its version and the source of the code that generates
modules, with the versions of Python and of the libraries the module is
written for). It holds the module's source, its compiled bytecode, and what
the evaluator needs besides (the backend that served it, the block size, the
note, which primitives' implementations its ``EXTERNALS`` are). A numba
module's source stays where numba keeps its machine code beside it
(``<cache>/numba``), so a warm entry also skips LLVM.

An entry is data this process wrote, never code from elsewhere: the
directory must belong to the user and be writable by nobody else (else the
cache is not used); files are written whole under a temporary name and
renamed into place, so concurrent processes see an entry whole or not at all;
an entry is read only if its recorded key is the key asked for and its files
hash to the digests it records, and anything else -- a stale, truncated or
altered entry -- is ignored and rebuilt. ``EXTERNALS`` are bound from the
graph at hand, never read from disk. The cache's size is bounded
(``symad.config.cache_size_bound()``): past it, the least recently used
entries are removed.

>>> import sympy
>>> from symad.graph import GraphBuilder
>>> from symad.primitives import sin_p
>>> x = sympy.Symbol("x"); builder = GraphBuilder(); builder.add_input(x)
>>> graph = builder.finish([builder.record(sin_p, (x,))])
>>> print(canonical_form(graph).decode())
inputs 1
('sin', (), (('i', 0),))
outputs (('n', 0),)
>>> builder = GraphBuilder(); builder.add_input(x)
>>> canonical_form(builder.finish([builder.record(sin_p, (x,))])) == canonical_form(graph)
True
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import marshal
import os
import sys
import tempfile
import threading

from symad import config

__all__ = ["canonical_form", "NotCanonical", "entry_key", "load_entry", "store_entry"]

_LOG = logging.getLogger(__name__)

#: Graphs of more nodes are not cached: hashing them would cost what lowering costs.
MAX_CACHED_NODES = 200_000
#: Entries are removed down to this share of the size bound when it is passed.
EVICT_TO = 0.8
#: The cache's size is measured (a scan of every entry) at the first store of a process,
#: then estimated by adding what each store writes, and measured again after this many
#: stores (other processes write too, and numba's machine code is written by numba) or
#: when the estimate passes the bound. Scanning at every store made a session that
#: compiled thousands of functions quadratic: 35,000 files read per store.
RESCAN_EVERY = 256


class NotCanonical(Exception):
    """A graph holds something :func:`canonical_form` cannot write exactly (it is not cached)."""


# ---------------------------------------------------------------------------
# The canonical form
# ---------------------------------------------------------------------------


def canonical_form(graph) -> bytes:
    """The graph as text that two graphs share exactly when they compute alike.

    One line per node, ``(primitive, params, operands)``: the primitive by name
    (``custom:<name>`` with its flags for a user's primitive), its parameters
    written by :func:`_canonical_param`, each operand as ``('i', k)`` (input k),
    ``('n', j)`` (node j) or ``('c', type, value)`` (a constant, floats in hex).
    A field a node may carry later (an array node's shape, say) is one more entry
    of the node's tuple here; a parameter kind :func:`_canonical_param` does not
    know raises :class:`NotCanonical`, so such a graph is not cached rather than
    hashed wrongly.
    """
    from symad.graph import constant_value

    reference: dict[int, tuple] = {id(atom): ("i", k) for k, atom in enumerate(graph.inputs)}
    for j, node in enumerate(graph.nodes):
        reference[id(node)] = ("n", j)

    def operand(atom) -> tuple:
        found = reference.get(id(atom))
        if found is None:
            found = reference[id(atom)] = _constant(atom, constant_value)  # constants are shared
        return found

    tags: dict[int, object] = {}
    shapes = [tuple(getattr(atom, "shape", ())) for atom in graph.inputs]
    lines = [f"inputs {len(graph.inputs)}" + (f" shapes {shapes!r}" if any(shapes) else "")]
    for node in graph.nodes:
        tag = tags.get(id(node.primitive))
        if tag is None:
            tag = tags[id(node.primitive)] = _primitive_tag(node.primitive)
        line = (tag, _canonical_param(node.params), tuple(map(operand, node.args)))
        if node.shape:  # an array node (scalar nodes' lines are as they always were)
            line += (tuple(node.shape),)
        lines.append(repr(line))
    lines.append(f"outputs {tuple(map(operand, graph.outputs))!r}")
    return "\n".join(lines).encode()


def _constant(atom, constant_value) -> tuple:
    """A constant atom exactly: an integer, a fraction, a binary float with its precision,
    a truth value (or, for other numbers such as pi, the float it is evaluated to)."""
    if getattr(atom, "is_Symbol", False):
        raise NotCanonical(f"an operand that is no input or node of the graph: {atom}")
    if getattr(atom, "is_Integer", False):
        return ("c", "int", int(atom))
    if getattr(atom, "is_Rational", False):
        return ("c", "rational", int(atom.p), int(atom.q))
    if getattr(atom, "is_Float", False):
        sign, mantissa, exponent, bits = atom._mpf_
        return ("c", "binary", sign, int(mantissa), exponent, bits)
    value = constant_value(atom)
    if isinstance(value, bool):
        return ("c", "bool", value)
    if isinstance(value, complex):
        return ("c", "complex", value.real.hex(), value.imag.hex())
    return ("c", "float", float(value).hex())


def _primitive_tag(primitive):
    from symad.compile.modules import is_builtin_primitive

    if is_builtin_primitive(primitive):
        return primitive.name
    return ("custom:" + primitive.name, bool(primitive.returns_boolean),
            bool(primitive.boolean_operands))


def _canonical_param(value):
    """A parameter (or a tuple of them) as plain data with one spelling per value."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, tuple):
        return tuple(_canonical_param(item) for item in value)
    from symad.array_primitives import ConstantArray

    if isinstance(value, ConstantArray):  # by content (a 128-bit digest), as the builder compares
        return ("array", _canonical_param(value._key))
    if getattr(value, "is_Number", False) and not getattr(value, "is_Symbol", True):
        from symad.graph import constant_value

        return _constant(value, constant_value)  # a SymPy number (an exact fill, say): exactly
    raise NotCanonical(f"a parameter of type {type(value).__name__}")


# ---------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------


@functools.cache
def _fingerprint(backend: str) -> bytes:
    """symad's version, the code that writes modules, and the versions of what the modules
    are written for: an entry from other code is never found.

    The code is identified by each source file's path, modification time (ns) and size,
    the rule Python's own bytecode cache trusts: an edit or a new installation changes
    them. (Reading and hashing the 25 files took 1-3 ms of every new process's first
    call, a third of a warm-cache call.)"""
    import numpy
    import scipy

    digest = hashlib.sha256()
    here = os.path.dirname(os.path.abspath(__file__))
    package = os.path.dirname(here)
    # The compiler's files, in its sub-packages too, and the loop nests numba's modules print.
    files = sorted(os.path.join(folder, name)
                   for top in (here, os.path.join(package, "loopnest"))
                   for folder, _, names in os.walk(top) for name in names if name.endswith(".py"))
    files += [os.path.join(package, name) for name in ("primitives.py", "special.py", "graph.py",
                                                       "atoms.py", "array_primitives.py",
                                                       "array_runtime.py")]
    for path in files:
        status = os.stat(path)
        digest.update(f"{path}\0{status.st_mtime_ns}\0{status.st_size}\n".encode())
    versions = [getattr(sys.modules.get("symad"), "__version__", "-"), sys.version, numpy.__version__, scipy.__version__]
    for library in ("numexpr", "numba", "llvmlite") if backend == "numba" else ("numexpr",):
        versions.append(_version(library))
    digest.update(repr(versions).encode())
    return digest.digest()


def _version(library: str) -> str:
    """``library``'s version, "-" if it is not installed; read from its metadata when it is not
    imported yet: looking a numba module up must not import numba (0.4 s), as the default's
    first call does (symad.compile.tiers.target_cached)."""
    import importlib
    import importlib.metadata

    module = sys.modules.get(library)
    if module is not None:
        return module.__version__
    try:
        return importlib.metadata.version(library)
    except importlib.metadata.PackageNotFoundError:
        try:
            return importlib.import_module(library).__version__
        except ImportError:
            return "-"


def entry_key(graph, backend: str, dtype, name: str, compiler: str = "scalar") -> str | None:
    """The entry's key for this graph, or None when it is not cached (turned off, too
    large, or holding what :func:`canonical_form` cannot write). ``compiler``: "scalar"
    (:mod:`symad.compile.scalar.program`'s modules) or "arrays" (:mod:`symad.compile.arrays`')."""
    if not config.cache_enabled() or len(graph.nodes) > MAX_CACHED_NODES:
        return None
    try:
        form = canonical_form(graph)
    except NotCanonical as reason:
        _LOG.debug("symad: %s is not cached on disk: %s", name, reason)
        return None
    digest = hashlib.sha256(b"symad generated module, layout 1\0")
    digest.update(_fingerprint(backend))
    labels = (backend, str(dtype), name, tuple(str(getattr(s, "name", s)) for s in graph.inputs))
    if compiler != "scalar":
        labels += (compiler,)
    digest.update(repr(labels).encode())
    digest.update(form)
    return digest.hexdigest()


# ---------------------------------------------------------------------------
# Entries
# ---------------------------------------------------------------------------


def _modules_directory() -> str | None:
    """``<cache>/modules``, made if needed, or None if it is not private to this user."""
    directory = os.path.join(config.cache_directory(), "modules")
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        if not _private(directory) or not _private(os.path.dirname(directory)):
            _LOG.warning("symad: not using the module cache %s: it must belong to this user "
                         "and be writable by no one else", directory)
            return None
    except OSError as error:
        _LOG.debug("symad: no module cache: %s", error)
        return None
    return directory


def _private(path: str) -> bool:
    status = os.stat(path)
    if hasattr(os, "getuid") and status.st_uid != os.getuid():
        return False
    return not status.st_mode & 0o022


def _externals_spec(graph, externals: list) -> list | None:
    """How a later process binds each external from its own graph: ``["kind", k]``, the
    implementation of the graph's k-th distinct (primitive, params) (with its params bound
    when it has any), ``["impl", k]``, that implementation alone (an array module writes
    the params into its call), or ``["array", j, name, dtype]``, the constant array
    parameter ``name`` of node j. None if one is not found."""
    import numpy as np

    kinds = _distinct_kinds(graph)
    spec = []
    for external in externals:
        if isinstance(external, np.ndarray):
            found = _constant_array_source(graph, external)
        else:
            found = None
            for index, (primitive, params) in enumerate(kinds):
                implementation = primitive.numpy_impl
                if external is implementation:
                    found = ["impl" if params else "kind", index]
                elif (params and isinstance(external, functools.partial)
                      and external.func is implementation and external.keywords == dict(params)
                      and not external.args):
                    found = ["kind", index]
                if found is not None:
                    break
        if found is None:
            return None
        spec.append(found)
    return spec


def _constant_array_source(graph, array) -> list | None:
    """``["array", j, name, dtype]`` for the constant array parameter equal to ``array``."""
    import numpy as np

    from symad.array_primitives import ConstantArray

    # Bit for bit after the cast (-0.0 is not 0.0 here, a NaN equals itself): any parameter
    # found gives the module exactly the array it was written with.
    data = np.ascontiguousarray(array).tobytes()
    for position, node in enumerate(graph.nodes):
        for name, value in node.params:
            if (isinstance(value, ConstantArray) and value.array.shape == array.shape
                    and np.ascontiguousarray(value.array, dtype=array.dtype).tobytes() == data):
                return ["array", position, name, array.dtype.str]
    return None


def _distinct_kinds(graph) -> list:
    """The graph's distinct (primitive, params), in an order fixed by its canonical form."""
    kinds = {}
    for node in graph.nodes:
        kinds.setdefault((id(node.primitive), node.params), (node.primitive, node.params))
    return sorted(kinds.values(),
                  key=lambda kind: repr((_primitive_tag(kind[0]), _canonical_param(kind[1]))))


def _bind_externals(graph, spec: list) -> list:
    import numpy as np

    kinds = _distinct_kinds(graph)
    externals = []
    for how, *where in spec:
        if how == "array":
            position, name, dtype = where
            value = dict(graph.nodes[position].params)[name]
            externals.append(np.ascontiguousarray(value.array, dtype=np.dtype(dtype)))
            continue
        primitive, params = kinds[where[0]]
        implementation = primitive.numpy_impl
        externals.append(functools.partial(implementation, **dict(params))
                         if params and how == "kind" else implementation)
    return externals


def _write(directory: str, name: str, data: bytes) -> None:
    """``data`` into ``directory/name`` whole: written under a temporary name, then renamed."""
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.replace(temporary, os.path.join(directory, name))
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def store_entry(key: str, graph, module, code) -> None:
    """Keep ``module`` (a GeneratedModule) and its compiled ``code`` (None for numba, whose
    module is imported from its file) under ``key``. Failures are logged, never raised."""
    directory = _modules_directory()
    if directory is None:
        return
    spec = _externals_spec(graph, module.externals)
    if spec is None:
        return
    try:
        source = module.source.encode()
        meta = {"key": key, "backend": module.backend, "dtype": module.dtype.name,
                "block_size": getattr(module, "block_size", None), "note": module.note,
                "externals": spec, "array_module": _array_fields(module),
                "source_sha256": _sha(source), "code_sha256": None,
                "numba_file": getattr(module, "path", None)}
        if meta["numba_file"] is None:
            _write(directory, f"{key}.py", source)
            if code is not None:
                data = marshal.dumps(code)
                _write(directory, f"{key}.code", data)
                meta["code_sha256"] = _sha(data)
        record = json.dumps(meta).encode()
        _write(directory, f"{key}.json", record)  # last: the entry is whole
        written = len(source) + len(record) + (len(data) if code is not None and
                                               meta["numba_file"] is None else 0)
        _keep_within_bound(config.cache_directory(), config.cache_size_bound(), written)
    except OSError as error:
        _LOG.debug("symad: could not write the module cache: %s", error)


def _array_fields(module) -> dict | None:
    """What an array program's module carries besides a scalar graph's, or None."""
    if not hasattr(module, "bytes_per_point"):
        return None
    return {"output_is_boolean": [bool(b) for b in module.output_is_boolean],
            "bytes_per_point": int(module.bytes_per_point)}


def module_cached(graph, backend: str, dtype, name: str, compiler: str = "scalar") -> bool:
    """True if an entry for ``backend``'s module of ``graph`` is kept (another process, or an
    earlier session, generated it: for numba, its machine code is kept beside it), without
    reading it. ``compiler`` as for :func:`entry_key`.

    >>> import sympy
    >>> from symad.graph import GraphBuilder
    >>> from symad.primitives import sin_p
    >>> x = sympy.Symbol("x"); builder = GraphBuilder(); builder.add_input(x)
    >>> module_cached(builder.finish([builder.record(sin_p, (x,))]), "numpy", "float64", "never made")
    False
    """
    key = entry_key(graph, backend, dtype, name, compiler)
    directory = os.path.join(config.cache_directory(), "modules")
    return key is not None and os.path.exists(os.path.join(directory, f"{key}.json"))


def load_entry(key: str, graph):
    """The GeneratedModule (or an array program's ArrayModule) kept under ``key`` (with
    ``.code``, its bytecode, or None), or None if there is no whole entry matching it."""
    from symad.compile.modules import ArrayModule, GeneratedModule

    directory = _modules_directory()
    if directory is None:
        return None
    path = os.path.join(directory, f"{key}.json")
    try:
        with open(path, "rb") as handle:
            meta = json.loads(handle.read())
        if meta.get("key") != key:
            return None
        numba_file = meta.get("numba_file")
        source_path = numba_file or os.path.join(directory, f"{key}.py")
        if numba_file is not None and os.path.dirname(numba_file) != os.path.join(
                config.cache_directory(), "numba"):
            return None  # recorded for another cache directory
        with open(source_path, "rb") as handle:
            source = handle.read()
        if _sha(source) != meta["source_sha256"]:
            return None
        code = None
        if meta.get("code_sha256"):
            with open(os.path.join(directory, f"{key}.code"), "rb") as handle:
                data = handle.read()
            if _sha(data) != meta["code_sha256"]:
                return None
            code = marshal.loads(data)
        externals = _bind_externals(graph, meta["externals"])
        if meta.get("array_module") is not None:  # an array program's module
            fields = meta["array_module"]
            module = ArrayModule(source.decode(), externals, meta["backend"], meta["dtype"],
                                 meta["note"], tuple(bool(b) for b in fields["output_is_boolean"]),
                                 int(fields["bytes_per_point"]))
        else:
            module = GeneratedModule(source.decode(), externals, meta["backend"], meta["dtype"],
                                     int(meta["block_size"]), None, meta["note"])
        module.code = code
        os.utime(path)  # recently used
        return module
    except (OSError, ValueError, KeyError, TypeError, IndexError, EOFError, AttributeError) as error:
        if not isinstance(error, FileNotFoundError):
            _LOG.debug("symad: ignoring the module cache entry %s: %s", key, error)
        return None


_SIZE_ESTIMATES: dict[str, tuple[int, int]] = {}  # cache root -> (bytes, stores since a scan)
_SIZE_LOCK = threading.Lock()


def _keep_within_bound(root: str, bound: int, written: int) -> None:
    """After a store of ``written`` bytes: evict if the cache may have passed ``bound``,
    scanning it only when the running estimate says so or is stale (:data:`RESCAN_EVERY`)."""
    with _SIZE_LOCK:
        estimate, stores = _SIZE_ESTIMATES.get(root, (None, 0))
        if estimate is not None and stores < RESCAN_EVERY and estimate + written <= bound:
            _SIZE_ESTIMATES[root] = (estimate + written, stores + 1)
            return
        _SIZE_ESTIMATES[root] = (_evict(root, bound), 0)


def _evict(root: str, bound: int) -> int:
    """Remove the least recently used entries (module files, and numba's module files with
    the machine code beside them) until the cache holds at most ``EVICT_TO`` of ``bound``;
    return the bytes it holds then."""
    groups: dict[str, list] = {}  # an entry's stem -> [(path, size, mtime)]
    for sub in ("modules", "numba", os.path.join("numba", "__pycache__")):
        directory = os.path.join(root, sub)
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            if not entry.is_file() or entry.name.startswith(".tmp-"):
                continue
            stem = entry.name.split(".")[0]
            status = entry.stat()
            groups.setdefault(stem, []).append((entry.path, status.st_size, status.st_mtime))
    total = sum(size for files in groups.values() for _, size, _ in files)
    if total <= bound:
        return total
    oldest_first = sorted(groups.values(), key=lambda files: max(m for _, _, m in files))
    for files in oldest_first:
        if total <= EVICT_TO * bound:
            break
        # the entry's record first, so that no reader finds it while its files go
        for path, size, _ in sorted(files, key=lambda item: not item[0].endswith(".json")):
            try:
                os.unlink(path)
                total -= size
            except OSError:
                pass
    return total
