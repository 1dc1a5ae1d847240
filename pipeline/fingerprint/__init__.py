"""Code fingerprints: which code made a cell's files, so that a cell made by other code is stale.

A cell's fingerprint is a hash per *unit* of the project's code that training the cell and
writing its files may run, and a digest over them:

- **Units.** A unit is one top-level statement of a project module: a function (with its
  decorators and nested functions, e.g. ``_flat`` with its ``wrapped``), a class (with all its
  methods), a module-level constant or table (every statement that binds or fills the name), the
  module's other top-level statements (``<module>:<toplevel>``: they run when it is imported), or
  a lambda inside a module-level table (``pipeline.datasets.registry:DATASETS['laplace'].load``).
  Keys name the module and the unit, never a line number, so code moving in a file is no change.
- **What is followed.** From the roots — :data:`TRAINING_ROOTS` (``train_cell``: the loop,
  seeding, schedules, device setup, negatives; ``run_cell``: the files, weights and checksums) and
  the cell's registry entries (its loss's adapter and similarity builder, its schedule, its
  encoder's builder with the functions its closure holds, its dataset's loader and its
  augmentation's view, each entry's options class, and the entry's own fields as data:
  ``pipeline.losses.registry:LOSSES['xclr']``) — every name a unit's code references that
  resolves statically (the module's globals, its imports, ``module.attr`` chains, imports inside
  a function) to a project unit is followed, transitively. The registry tables themselves
  (:data:`REGISTRIES`) are not followed: a reference to ``LOSSES`` reaches only the cell's own
  entry, so editing one loss makes only that loss's cells stale. A plugin's modules (a module
  name or a ``.py`` file in ``plugins:``) are followed like the project's, with the modules of its
  own package (or, for a single file, the modules beside it).
- **The hash.** Each unit is hashed as a normalised token stream (:func:`normalised_tokens`):
  comments, blank lines, line breaks inside brackets, indentation width, trailing commas that
  change nothing and docstrings do not count; names, operators, literal values (``'a'`` and
  ``"a"`` are one value) and the statement structure do. f-strings are one token of their source
  text under every Python version (3.12 tokenises them in parts), so Python 3.11, 3.12 and 3.13
  give the same hashes for the same source.

Not covered: code reached only dynamically (``getattr``, ``importlib``, a string naming a
function), third-party code (torch, numpy, pyarrow: their versions are not part of the
fingerprint), the params (they are the cell id), and the data (the version carries its hash).

Pure stdlib: sources are read from the files (nothing is imported to hash them), each module is
tokenised once per process, and a cell's fingerprint is computed once per distinct set of
registry entries (objective, loss, schedule, arch, dataset, augmentation).

The parts:

- :mod:`.units`: a module's source read into the normalised token stream (:func:`source_hash`)
  and cut into units, each hashed (:class:`Unit`, :class:`ModuleInfo`);
- :mod:`.sources`: which file a module is (the project's, a plugin's), what text it holds (the
  file, or a test's :func:`source_overrides`), its analysis, and every memo of the package, so
  that a changed source is forgotten in one place (``sources.forget``);
- :mod:`.reach`: what a unit's code references, resolved statically, followed from the roots;
  the units of runtime objects (:func:`object_keys`);
- :mod:`.digest`: a cell's registry entries as units, and its :class:`Fingerprint`
  (:func:`code_fingerprint`).
"""

from pipeline.fingerprint.digest import (
    TRAINING_ROOTS,
    Fingerprint,
    cell_entries,
    code_fingerprint,
    fingerprint,
    function_hash,
)
from pipeline.fingerprint.reach import object_keys, unit_of_code
from pipeline.fingerprint.sources import (
    PROJECT,
    PROJECT_DIR,
    module_of_path,
    module_source,
    module_units,
    source_overrides,
)
from pipeline.fingerprint.units import (
    HASH_CHARS,
    REGISTRIES,
    REGISTRY_MODULES,
    TOPLEVEL,
    ModuleInfo,
    Unit,
    normalised_tokens,
    source_hash,
)

__all__ = [
    "HASH_CHARS",
    "PROJECT",
    "PROJECT_DIR",
    "REGISTRIES",
    "REGISTRY_MODULES",
    "TOPLEVEL",
    "TRAINING_ROOTS",
    "Fingerprint",
    "ModuleInfo",
    "Unit",
    "cell_entries",
    "code_fingerprint",
    "fingerprint",
    "function_hash",
    "module_of_path",
    "module_source",
    "module_units",
    "normalised_tokens",
    "object_keys",
    "source_hash",
    "source_overrides",
    "unit_of_code",
]
