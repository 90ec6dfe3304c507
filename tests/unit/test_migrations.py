"""Migration announcements: what the controller accepts, refuses, and how a
'release' from each side ends a migration (pure logic)."""
import uuid

import pytest

from virtualwire.core import ids
from virtualwire.control.migrations import (ABORTED, COMPLETED, PREPARED,
                                           TIMED_OUT, MigrationBook)
from virtualwire.core import errors

VM = str(uuid.uuid4())
HOSTS = {'h1', 'h2', 'h3'}
WHERE = {'nic-a': 'h1', 'nic-b': 'h1'}


def announce(book, connected=HOSTS, **over):
    doc = dict(vm='g', vm_uuid=VM, vnics=['nic-a', 'nic-b'],
               destination='h2')
    doc.update(over)
    return book.announce(doc, HOSTS, connected, WHERE.get)


def test_accepts_and_records_sources():
    m = announce(MigrationBook())
    assert m.state == PREPARED
    assert m.sources == {'nic-a': 'h1', 'nic-b': 'h1'}
    assert m.destination == 'h2'


@pytest.mark.parametrize('over,connected,kind,words', [
    ({'destination': 'h9'}, HOSTS, errors.NotFound, 'unknown'),
    ({}, {'h1', 'h3'}, errors.Conflict, 'not connected'),
    ({'vnics': ['nic-a', 'ghost']}, HOSTS, errors.NotFound, 'ghost'),
    ({'vm_uuid': 'nope'}, HOSTS, errors.Invalid, 'uuid'),
    ({'vnics': 'nic-a'}, HOSTS, errors.Invalid, 'list'),
    ({'vnics': ['nic-a', 'nic-a']}, HOSTS, errors.Invalid, 'twice'),
    ({'extra': 1}, HOSTS, errors.Malformed, 'extra'),
])
def test_refusals_say_why_and_record_nothing(over, connected, kind, words):
    book = MigrationBook()
    with pytest.raises(kind) as e:
        announce(book, connected, **over)
    assert type(e.value) is kind
    assert words in e.value.message.lower()
    assert book.all() == []


def test_bad_vnic_id_is_an_invalid_id():
    with pytest.raises(ids.InvalidId):
        announce(MigrationBook(), vnics=['bad id with spaces'])


def test_release_on_source_completes_on_destination_aborts():
    book = MigrationBook()
    announce(book)
    assert book.released(VM, 'h3') is None          # not involved
    assert book.released(VM, 'h1').state == COMPLETED
    assert book.released(VM, 'h1') is None          # already over
    announce(book)
    assert book.released(VM, 'h2').state == ABORTED
    assert [m.state for m in book.all()] == [ABORTED, COMPLETED]


def test_reannounce_aborts_the_stale_attempt():
    book = MigrationBook()
    first = announce(book)
    second = announce(book)
    assert first.state == ABORTED and second.state == PREPARED
    assert len(book.active) == 1


def test_a_move_seen_without_announcement_is_recorded_per_guest():
    book = MigrationBook()
    m = book.inferred('nic-a', VM, 'h1', 'h2')
    assert (m.found_by, m.vnics, m.sources, m.destination) == (
        'ovsdb', ('nic-a',), {'nic-a': 'h1'}, 'h2')
    # The guest's second vNIC joins the same record; seeing it again does
    # nothing.
    assert book.inferred('nic-b', VM, 'h1', 'h2') is m
    assert m.vnics == ('nic-a', 'nic-b')
    assert book.inferred('nic-b', VM, 'h1', 'h2') is None
    # Both moves ending in the data plane end the record.
    book.move_finished('nic-a', COMPLETED)
    book.move_finished('nic-b', COMPLETED)
    assert m.state == COMPLETED and not book.active


def test_an_unannounced_move_survives_a_restart_as_a_record():
    book = MigrationBook()
    m = book.inferred('nic-a', '', 'h1', 'h2')       # no vm-id on the port
    again = MigrationBook()
    again.restore([m.view()])
    (r,) = again.active.values()
    assert (r.sources, r.destination, r.found_by) == ({'nic-a': 'h1'}, 'h2',
                                                      'ovsdb')


def test_a_late_announcement_supersedes_the_inferred_record():
    book = MigrationBook()
    book.inferred('nic-a', '', 'h1', 'h2')
    m = announce(book)
    assert list(book.active.values()) == [m] and m.found_by == 'hook'
    assert book.history == {}                 # nothing pretended to abort
    # ... and a move the hook announced is not inferred again.
    assert book.inferred('nic-a', VM, 'h1', 'h2') is None


def test_a_move_that_timed_out_ends_the_migration_timed_out():
    book = MigrationBook()
    m = announce(book)
    book.move_finished('nic-a', TIMED_OUT)
    assert m.state == PREPARED                # nic-b still moving
    book.move_finished('nic-b', COMPLETED)
    assert m.state == TIMED_OUT and m.moves == {'nic-a': TIMED_OUT,
                                                'nic-b': COMPLETED}
    # The hook's later word on it changes nothing.
    assert book.released(VM, 'h1') is None and m.state == TIMED_OUT


@pytest.mark.parametrize('value', ['0', '-3', 'soon', 'nan'])
def test_controller_refuses_a_move_timeout_that_is_not_positive(value,
                                                                 capsys):
    from virtualwire.main import parse_args
    with pytest.raises(SystemExit) as e:
        parse_args(['--move-timeout', value])
    assert e.value.code == 2
    assert 'must be a number of seconds > 0' in capsys.readouterr().err
    assert parse_args(['--move-timeout', '2.5']).move_timeout == 2.5


@pytest.mark.parametrize('value', ['-1', '1001', 'soon', '2.5'])
def test_controller_refuses_an_activation_settle_out_of_range(value, capsys):
    from virtualwire.main import parse_args
    with pytest.raises(SystemExit) as e:
        parse_args(['--activation-settle-ms', value])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert ('must be 0-1000, not %s' % value if value.lstrip('-').isdigit()
            else "must be a whole number, not '%s'" % value) in err, err
    assert parse_args([]).activation_settle_ms == 20
    assert parse_args(['--activation-settle-ms', '0']).activation_settle_ms \
        == 0
