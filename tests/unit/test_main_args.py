"""The controller refuses to start insecurely unless told it is a lab,
and says what is missing."""
import pytest

from virtualwire import daemon, main


def _refusal(argv, check):
    args = main.parse_args(argv)
    with pytest.raises(SystemExit) as e:
        check(args)
    return str(e.value.code)


def test_no_tls_files_and_no_lab_flag_is_refused_saying_what_is_missing():
    msg = _refusal(['--private-key', 'k.pem'], daemon.load_tls)
    assert '--certificate, --ca-cert' in msg and 'vw-pki' in msg and \
        '--insecure-plaintext-lab' in msg


def test_the_lab_flag_and_tls_files_exclude_each_other():
    msg = _refusal(['--insecure-plaintext-lab', '--ca-cert', 'c.pem'],
                   daemon.load_tls)
    assert 'exclude each other' in msg
    assert daemon.load_tls(main.parse_args(['--insecure-plaintext-lab'])) \
        is None


def test_unreadable_tls_files_are_named(tmp_path):
    msg = _refusal(['--private-key', str(tmp_path / 'k'), '--certificate',
                    str(tmp_path / 'c'), '--ca-cert', str(tmp_path / 'a')],
                   daemon.load_tls)
    assert 'cannot read %s' % (tmp_path / 'k') in msg


@pytest.mark.parametrize('remote, words', [
    ('tcp:10.0.0.1:6641', 'plain TCP lets whoever reaches the database'),
    ('unix:/run/db.sock,tcp:10.0.0.2:6641', 'plain TCP'),
    ('ssl:10.0.0.1:6641', 'ssl: needs --intent-db-ca'),
    ('udp:10.0.0.1:6641', 'remotes are unix:, ssl: or (lab) tcp:'),
])
def test_a_plain_remote_intent_database_is_refused(remote, words):
    assert words in _refusal(['--intent-db', remote],
                             daemon.check_intent_remote)


def test_a_unix_intent_database_or_tcp_in_a_lab_is_accepted():
    for argv in (['--intent-db', 'unix:/run/vw/intent.sock'],
                 ['--intent-db', 'tcp:127.0.0.1:6641',
                  '--insecure-plaintext-lab'],
                 ['--intent-db', 'ssl:10.0.0.1:6641,ssl:10.0.0.2:6641',
                  '--intent-db-ca', 'ca.pem', '--private-key', 'k',
                  '--certificate', 'c', '--ca-cert', 'a']):
        daemon.check_intent_remote(main.parse_args(argv))


@pytest.mark.parametrize('argv,words', [
    (['--hold-frames', '0'], '--hold-frames must be 1-65536, not 0'),
    (['--hold-bytes', 'lots'], '--hold-bytes must be a whole number'),
    (['--hold', 'maybe'], "invalid choice: 'maybe'")])
def test_bad_numbers_and_choices_are_refused_saying_why(argv, words, capsys):
    with pytest.raises(SystemExit) as e:
        main.parse_args(argv)
    assert e.value.code == 2 and words in capsys.readouterr().err


def test_activation_at_stop_on_and_held_frames_on_hosts_by_default():
    # Held where the destination keeps a ring (vw-host-setup --hold-frames).
    args = main.parse_args([])
    assert (args.hold, args.hold_frames, args.hold_bytes) == \
        ('hosts', 512, 1 << 20)
    assert args.activate_at_stop == 'on'
    assert main.parse_args(['--hold', 'on', '--activate-at-stop', 'off']
                           ).activate_at_stop == 'off'
