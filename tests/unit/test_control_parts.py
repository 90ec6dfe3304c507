"""The controller's shape, held: its parts own their state and never reach
one another (docs/architecture.rst, "The controller's parts"). Read from
the code's own syntax tree, so a mixin or a part importing another part
fails here before review."""
import ast
import pathlib

import virtualwire

PACKAGE = pathlib.Path(virtualwire.__file__).parent
CONTROL = PACKAGE / 'control'
PARTS = {'programming', 'safe_start', 'migrating', 'cloud_word', 'holding',
         'admission', 'roles', 'extenders', 'provider_switches',
         'switch_moves', 'quiet_collections'}
# What a part may import from control/: the shared reads, the refusal
# log, and pure helpers; never another part.
SHARED = {'shared', 'refusals', 'migrations', 'loop', 'takeover', 'lag_guard',
          'host_rings',
          # holding's own pieces, each owning one kind of its state
          'source_logs', 'held_delivery', 'source_reads'}


def tree(name):
    return ast.parse((CONTROL / (name + '.py')).read_text())


def control_imports(name):
    out = set()
    for n in ast.walk(tree(name)):
        if isinstance(n, ast.ImportFrom) and n.module and \
                n.module.startswith('virtualwire.control'):
            mod = n.module.split('.')[2:]
            out.update(mod or [a.name for a in n.names])
    return out


def classes():
    for path in sorted(PACKAGE.rglob('*.py')):
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, ast.ClassDef):
                yield path.relative_to(PACKAGE), n


def test_no_part_imports_another_part():
    wrong = {p: sorted(control_imports(p) - SHARED) for p in PARTS}
    assert {p: w for p, w in wrong.items() if w} == {}


def test_the_controller_is_composed_not_mixed_in():
    ctl = next(n for n in ast.walk(tree('controller'))
               if isinstance(n, ast.ClassDef) and n.name == 'Controller')
    assert ctl.bases == []
    for p in PARTS:
        for n in ast.walk(tree(p)):
            if isinstance(n, ast.ClassDef):
                assert not [b for b in n.bases
                            if not isinstance(b, ast.Name) or
                            b.id not in ('NamedTuple', 'Protocol')], \
                    (p, n.name)


def test_the_parts_know_every_part_module():
    """A new part is named here (and drawn in the architecture doc)."""
    on_disk = {f.stem for f in CONTROL.glob('*.py')}
    other = {'__init__', 'controller', 'views', 'startup', 'gateways',
             'shared_settings'} | SHARED
    assert on_disk - other == PARTS


def test_no_class_is_too_large_to_read():
    big = [(str(p), c.name, c.end_lineno - c.lineno + 1)
           for p, c in classes() if c.end_lineno - c.lineno + 1 > 400]
    assert big == []
