"""Settings files for the daemons: the command's own options as keys,
judged by the flag's own checks, errors by line, flags override."""
import pytest

from virtualwire import config_file
from virtualwire.cli import vwctl
from virtualwire.collectord.main import parse_args as collector_args
from virtualwire.extender.command import build_parser as extender_parser
from virtualwire.main import parse_args as controller_args


def write(tmp_path, text, name='controller.yaml'):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_the_file_sets_what_the_flags_would_and_flags_override(tmp_path):
    path = write(tmp_path, 'rest-listen: 10.0.0.1:8780\n'
                 'hold: on\n'              # YAML 1.1 would make this True
                 'hold-frames: 64\n'
                 'insecure-plaintext-lab: true\n'
                 'host-ovsdb: [ssl:10.0.0.7:6640, ssl:10.0.0.8:6640]\n')
    a = controller_args(['--config', path])
    assert (a.rest_listen, a.hold, a.hold_frames) == \
        ('10.0.0.1:8780', 'on', 64)
    assert a.insecure_plaintext_lab is True
    assert a.host_ovsdb == ['ssl:10.0.0.7:6640', 'ssl:10.0.0.8:6640']
    b = controller_args(['--config', path, '--hold-frames', '8',
                         '--hold', 'off'])
    assert (b.hold_frames, b.hold, b.rest_listen) == \
        (8, 'off', '10.0.0.1:8780')
    # Without a file, the built-in defaults.
    assert controller_args([]).hold_frames == 512


def test_every_error_is_named_by_line_and_nothing_starts(tmp_path, capsys):
    path = write(tmp_path, '# VirtualWire\n'
                 'stats-interval: 9\n'
                 'hold: maybe\n'
                 'rest-lisen: 127.0.0.1:1\n'
                 'insecure-plaintext-lab: yes please\n'
                 'hold-frames: [1, 2]\n'
                 'hold: off\n')
    with pytest.raises(SystemExit) as e:
        controller_args(['--config', path])
    assert e.value.code == 2
    err = capsys.readouterr().err
    for line in ('%s:2: stats-interval: must be 1 to 5 seconds, got 9',
                 "%s:3: hold: invalid choice: 'maybe'",
                 "%s:4: unknown setting 'rest-lisen' (did you mean "
                 "'rest-listen'?)",
                 '%s:5: insecure-plaintext-lab must be true or false',
                 '%s:6: hold-frames takes one value, not a list',
                 '%s:7: hold is already set on line 3'):
        assert line % path in err, err


def test_files_that_are_not_settings_say_so(tmp_path):
    p = controller_args.__globals__['build_parser']()
    for text, want in (('a: [1\n', ':2: not YAML'),
                       ('- rest-listen\n', ':1: must be a mapping')):
        with pytest.raises(config_file.ConfigError) as e:
            config_file.read(p, write(tmp_path, text))
        assert want in e.value.errors[0], e.value.errors
    with pytest.raises(config_file.ConfigError) as e:
        config_file.read(p, str(tmp_path / 'missing.yaml'))
    assert 'No such file' in e.value.errors[0]
    assert config_file.read(p, write(tmp_path, '# nothing yet\n')) == {}


def test_a_required_flag_can_come_from_the_file(tmp_path):
    path = write(tmp_path, 'name: x1\nstate-dir: /var/lib/vw-ext\n'
                 'controller: https://10.0.0.1:8781\ntoken-file: /t\n'
                 'rendezvous: 10.0.0.1:3478\n', 'extender.yaml')
    a = config_file.parse(extender_parser(), ['--config', path], '')
    assert (a.name, a.rendezvous) == ('x1', '10.0.0.1:3478')
    with pytest.raises(SystemExit):         # and is still required without
        config_file.parse(extender_parser(), [], '')


def test_the_extenders_nat_timings_are_settings_and_checked(tmp_path,
                                                          capsys):
    base = ['--name', 'x1', '--state-dir', '/s', '--controller',
            'https://10.0.0.1:8781', '--token-file', '/t', '--rendezvous',
            '10.0.0.1:3478']
    a = config_file.parse(extender_parser(), base, '')
    assert (a.reprobe_after, a.relay_recheck) == (15.0, 30.0)
    path = write(tmp_path, 'reprobe-after: 8\nrelay-recheck: 12\n',
                 'extender.yaml')
    a = config_file.parse(extender_parser(), base + ['--config', path], '')
    assert (a.reprobe_after, a.relay_recheck) == (8.0, 12.0)
    with pytest.raises(SystemExit):
        config_file.parse(extender_parser(), base + ['--reprobe-after', '0'],
                          '')
    assert 'seconds from 0.5 to 3600, got \'0\'' in capsys.readouterr().err


def test_the_collectors_own_checks_still_apply(tmp_path):
    path = write(tmp_path, 'stats-interval: 0.5\n', 'collector.yaml')
    with pytest.raises(SystemExit):
        collector_args(['--config', path])


def test_vwctl_config_check_needs_no_controller(tmp_path, capsys):
    good = write(tmp_path, 'of-listen: 0.0.0.0:6653\n')
    assert vwctl.main(['config', 'check', good]) == 0
    assert capsys.readouterr().out == \
        '%s: ok, 1 setting for virtualwire-controller\n' % good
    bad = write(tmp_path, 'of-listen: 1\nfoo: 2\n', 'x.yaml')
    assert vwctl.main(['config', 'check', bad]) == 2
    assert 'which daemon' in capsys.readouterr().err
    assert vwctl.main(['config', 'check', bad, '--for', 'collector']) == 1
    assert capsys.readouterr().err == \
        "%s:2: unknown setting 'foo'\n" % bad
