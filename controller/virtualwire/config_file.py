"""Configuration files for the daemons: `/etc/virtualwire/NAME.yaml`, a
mapping of the command's own long options without their dashes
(`rest-listen: 127.0.0.1:8780`), so the file and the flags cannot mean
different things. The command's argparse parser is the schema: a key
must be one of its options, and a value passes the very check the flag
would (its type function, its choices). Flags still override the file.

Errors name the file and line (YAML's node marks), all of them at once,
so `vwctl config check FILE` and a daemon refusing to start say the same.
"""
import argparse
import difflib
import os

import yaml


class ConfigError(Exception):
    """errors: ['FILE:LINE: message', ...]"""

    def __init__(self, errors):
        super().__init__('\n'.join(errors))
        self.errors = errors


def _options(parser):
    """{key: action} of every long option a file may set (not --help,
    --version, nor --config itself)."""
    out = {}
    for a in parser._actions:                     # noqa: SLF001 (argparse)
        longs = [s for s in a.option_strings if s.startswith('--')]
        if not longs or isinstance(a, (argparse._HelpAction,
                                       argparse._VersionAction)):
            continue
        key = longs[0][2:]
        if key != 'config':
            out[key] = a
    return out


def _scalar(node):
    return node.value if isinstance(node, yaml.ScalarNode) else None


def _convert(parser, action, key, node, where):
    """The value as the flag would have given it, or an error string."""
    if isinstance(action, (argparse._StoreTrueAction,
                           argparse._StoreFalseAction)):
        value = yaml.safe_load(yaml.serialize(node))
        if not isinstance(value, bool):
            return None, '%s: %s must be true or false' % (where, key)
        return value if isinstance(action, argparse._StoreTrueAction) \
            else not value, None
    if isinstance(action, argparse._AppendAction):
        items = node.value if isinstance(node, yaml.SequenceNode) else [node]
        out = []
        for item in items:
            v, err = _one(parser, action, key, item, where)
            if err:
                return None, err
            out.append(v)
        return out, None
    return _one(parser, action, key, node, where)


def _one(parser, action, key, node, where):
    text = _scalar(node)
    if text is None:
        return None, '%s: %s takes one value, not a %s' % (
            where, key, 'list' if isinstance(node, yaml.SequenceNode)
            else 'mapping')
    try:
        value = parser._get_values(action, [text])   # noqa: SLF001
    except argparse.ArgumentError as e:
        return None, '%s: %s: %s' % (where, key, e.message)
    return value, None


def read(parser, path):
    """{dest: value} from the file at path; ConfigError listing every
    problem otherwise."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise ConfigError(['%s: %s' % (path, e.strerror)])
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as e:
        mark = getattr(e, 'problem_mark', None)
        line = mark.line + 1 if mark else 1
        raise ConfigError(['%s:%d: not YAML: %s' % (
            path, line, getattr(e, 'problem', None) or e)])
    if root is None:
        return {}
    if not isinstance(root, yaml.MappingNode):
        raise ConfigError(['%s:%d: must be a mapping of settings '
                           '(key: value)' % (path, root.start_mark.line + 1)])
    known, values, errors = _options(parser), {}, []
    seen: dict = {}
    for knode, vnode in root.value:
        where = '%s:%d' % (path, knode.start_mark.line + 1)
        key = _scalar(knode)
        if key in seen:
            errors.append('%s: %s is already set on line %d' % (
                where, key, seen[key]))
            continue
        seen[key] = knode.start_mark.line + 1
        action = known.get(key) if isinstance(key, str) else None
        if action is None:
            near = difflib.get_close_matches(str(key), known, 1)
            errors.append('%s: unknown setting %r%s' % (
                where, key, ' (did you mean %r?)' % near[0] if near else ''))
            continue
        value, err = _convert(parser, action, key, vnode, where)
        if err:
            errors.append(err)
        else:
            values[action.dest] = value
    if errors:
        raise ConfigError(errors)
    return values


def add_argument(parser, default):
    parser.add_argument(
        '--config', metavar='FILE', default=None,
        help='settings file, YAML: each key a long option of this command '
             'without its dashes; flags override it (default: %s if it '
             'exists)' % default)


def parse(parser, argv, default):
    """parse_args with the settings file's values as defaults. The file is
    --config's, or `default` when that exists; a bad file exits (2) with
    every error, as a bad flag does."""
    add_argument(parser, default)
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument('--config')
    path = pre.parse_known_args(argv)[0].config
    if path is None and default and os.path.exists(default):
        path = default
    if path:
        try:
            values = read(parser, path)
        except ConfigError as e:
            parser.exit(2, '%s: bad settings file:\n  %s\n' % (
                parser.prog, '\n  '.join(e.errors)))
        for a in parser._actions:                  # noqa: SLF001
            if a.dest in values:
                a.required = False      # the file gives it
        parser.set_defaults(**values)
    return parser.parse_args(argv)


def seconds(low, high, above=False):
    """An argparse type: a number of seconds from `low` (or, `above`,
    beyond it) to `high`, refused with the range and what was given."""
    def parse(text):
        try:
            v = float(text)
        except ValueError:
            v = float('nan')
        if not ((low < v) if above else (low <= v)) or not v <= high:
            raise argparse.ArgumentTypeError('seconds %s %g to %g, got %r' % (
                'above' if above else 'from', low, high, text))
        return v
    return parse
