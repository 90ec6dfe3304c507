"""SIGHUP: the daemons read their settings file again; what can change
at run time changes, the rest is named as needing a restart, and a file
with errors changes nothing."""
import logging

import pytest

from virtualwire.daemon import lifecycle as process
from virtualwire.main import parse_args


def test_a_reload_applies_the_log_level_and_names_what_needs_a_restart(
        tmp_path, caplog):
    path = tmp_path / 'controller.yaml'
    path.write_text('log-level: INFO\nhold-frames: 64\n'
                    'host-ovsdb-port: 6640\n')
    args = parse_args(['--config', str(path)])
    log = logging.getLogger('virtualwire.test')
    path.write_text('log-level: DEBUG\nhold-frames: 8\n'
                    'host-ovsdb-port: 6650\n')
    caplog.set_level(logging.INFO)
    try:
        got = process.reload(args, lambda: parse_args(
            ['--config', str(path)]), log)
        assert got.log_level == 'DEBUG'
        assert logging.getLogger().level == logging.DEBUG
        assert got.hold_frames == 64            # the row's word rules
        assert got.host_ovsdb_port == 6640      # only at the next start
        assert 'settings reloaded: log_level applied; needing a restart: ' \
            '--host-ovsdb-port; shared by every instance, so set at run ' \
            'time with `vwctl config set`: hold-frames' in caplog.text
        # A broken file: nothing changes, and the log says why.
        path.write_text('log-level: INFO\nhold-frames: many\n')
        caplog.clear()
        got = process.reload(got, lambda: parse_args(
            ['--config', str(path)]), log)
        assert got.log_level == 'DEBUG'
        assert 'settings not reloaded' in caplog.text
    finally:
        logging.getLogger().setLevel(logging.WARNING)
        logging.getLogger().removeHandler(process._handler)
        process._handler = None


@pytest.fixture
def file_logging(tmp_path):
    """(settings file, log file, args) of a daemon logging to a file; the
    root logger's handlers as they were afterwards."""
    log_file = tmp_path / 'controller.log'
    path = tmp_path / 'controller.yaml'
    path.write_text('log-file: %s\n' % log_file)
    root = logging.getLogger()
    saved = list(root.handlers)
    yield path, log_file, parse_args(['--config', str(path)])
    root.removeHandler(process._handler)
    process._handler.close()
    process._handler = None
    assert root.handlers == saved


def test_a_log_file_is_reopened_after_logrotate_moved_it(tmp_path,
                                                          file_logging):
    path, log_file, args = file_logging
    process.configure_logging(args)
    logging.getLogger('virtualwire.x').warning('before')
    log_file.rename(tmp_path / 'controller.log.1')      # logrotate
    process.reload(args, lambda: parse_args(['--config', str(path)]),
                   logging.getLogger('virtualwire.x'))
    logging.getLogger('virtualwire.x').warning('after')
    assert 'before' in (tmp_path / 'controller.log.1').read_text()
    assert 'after' in log_file.read_text()


def test_the_probe_asks_loopback_at_the_rest_address(tmp_path):
    from virtualwire import config_file, probe
    from virtualwire.main import build_parser
    for listen, lab, want in (('0.0.0.0:8780', False,
                               'https://127.0.0.1:8780'),
                              ('127.0.0.1:9', True, 'http://127.0.0.1:9'),
                              ('[::]:8780', False, 'https://127.0.0.1:8780')):
        path = tmp_path / 'c.yaml'
        path.write_text('rest-listen: "%s"\ninsecure-plaintext-lab: %s\n'
                        % (listen, 'true' if lab else 'false'))
        a = config_file.parse(build_parser(), ['--config', str(path)], '')
        assert probe.url_of(a) == want
    # Nothing listens: it says so, within its time.
    code, why = probe.probe('http://127.0.0.1:9', '/healthz', 0.3)
    assert code == 1 and 'refused' in why.lower()


def test_json_logs_on_request_switched_by_a_reload(file_logging):
    import json
    path, log_file, args = file_logging
    log = logging.getLogger('virtualwire.x')
    process.configure_logging(args)
    log.warning('as text')
    path.write_text('log-file: %s\nlog-format: json\n' % log_file)
    process.reload(args, lambda: parse_args(['--config', str(path)]), log)
    try:
        raise ValueError('boom')
    except ValueError:
        log.exception('as json: %s', 'one object a line')
    lines = log_file.read_text().splitlines()
    assert lines[0].endswith('WARNING virtualwire.x: as text')
    docs = [json.loads(x) for x in lines[1:]]
    assert docs[0]['message'].startswith('settings reloaded: ')
    last = docs[-1]
    assert last['message'] == 'as json: one object a line'
    assert last['level'] == 'ERROR' and last['logger'] == 'virtualwire.x'
    assert 'ValueError: boom' in last['traceback']
    assert last['time'].endswith('+00:00')
