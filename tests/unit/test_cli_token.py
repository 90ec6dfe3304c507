"""vwctl takes its token from a file or the environment, never from the
command line (where `ps` shows it to every user of the machine)."""
import pytest

from virtualwire.cli import vwctl
from virtualwire.cli.client import CliError, load_config


def _args(*argv):
    return vwctl.build_parser().parse_args(list(argv) + ['wires'])


def test_there_is_no_token_option(capsys):
    with pytest.raises(SystemExit) as e:
        _args('--token', 'secret')
    assert e.value.code == 2
    assert '[--token-file FILE]' in capsys.readouterr().err    # the usage


def test_the_token_comes_from_a_file_or_the_environment(tmp_path,
                                                       monkeypatch):
    f = tmp_path / 'tok'
    f.write_text('from-file\n')
    monkeypatch.setenv('VWCTL_TOKEN', 'from-env')
    monkeypatch.setenv('VWCTL_CONFIG', str(tmp_path / 'none.conf'))
    assert load_config(_args('--token-file', str(f)))[1] == 'from-file'
    assert load_config(_args())[1] == 'from-env'


def test_an_unreadable_token_file_says_which(tmp_path):
    with pytest.raises(CliError, match='cannot read token file .*missing'):
        load_config(_args('--token-file', str(tmp_path / 'missing')))
