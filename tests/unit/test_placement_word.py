"""The cloud's word on where a vNIC runs (core.placement.Word): another
host plugging it is refused, not believed; a move the cloud authorized
goes through; a vNIC with no word behaves as before."""
from virtualwire.core.model import Location
from virtualwire.core.placement import (COMPLETED, ClaimRefused, MoveEnded,
                                        MoveSeen, Placement, Word)


def placed():
    p = Placement()
    p.set_word('v', Word('h2'))
    p.plug('h2', {}, {'v': 5})
    return p


def test_another_host_plugging_a_placed_vnic_is_refused():
    p = placed()
    changed, events = p.plug('h3', {}, {'v': 9})
    assert changed == set()
    assert events == [ClaimRefused('v', 'h3', Word('h2'))]
    assert p.location('v') == Location('h2', 5) and 'v' not in p.moves
    assert p.refused == {'v': {'h3': 9}}
    # Seen again (its port renumbered): still refused, reported once.
    assert p.plug('h3', {'v': 9}, {'v': 10}) == (set(), [])
    # Unplugged: nothing left to refuse.
    p.plug('h3', {'v': 10}, {})
    assert p.refused == {} and p.location('v') == Location('h2', 5)


def test_a_move_the_cloud_authorized_goes_through_and_the_source_goes():
    p = placed()
    p.plug('h3', {}, {'v': 9})                     # plugged before the word
    changed, events = p.set_word('v', Word('h3', previous='h2'))
    assert changed == {'v'} and [type(e) for e in events] == [MoveSeen]
    assert p.refused == {}
    assert p.where('v') == (Location('h2', 5), Location('h3', 9))
    assert p.activate('v', 'h3') and p.location('v') == Location('h3', 9)
    _changed, events = p.plug('h2', {'v': 5}, {})
    assert [(type(e), e.outcome) for e in events] == [(MoveEnded, COMPLETED)]
    # The source the cloud let go of may not come back.
    assert p.words['v'] == Word('h3')
    _changed, events = p.plug('h2', {}, {'v': 6})
    assert events == [ClaimRefused('v', 'h2', Word('h3'))]
    assert p.location('v') == Location('h3', 9)


def test_a_word_that_forbids_a_current_claim_takes_it_away():
    p = Placement()
    p.plug('h2', {}, {'v': 5})
    p.plug('h3', {}, {'v': 9})                     # no word: a move inferred
    assert 'v' in p.moves
    changed, events = p.set_word('v', Word('h2'))
    assert changed == {'v'}
    assert [type(e) for e in events] == [MoveEnded, ClaimRefused]
    assert p.location('v') == Location('h2', 5) and 'v' not in p.moves
    # Withdrawn: whoever plugs it claims it again, as without a word.
    changed, events = p.set_word('v', None)
    assert changed == {'v'} and 'v' in p.moves and p.refused == {}


def test_no_word_no_change():
    p = Placement()
    p.plug('h2', {}, {'v': 5})
    _c, events = p.plug('h3', {}, {'v': 9})
    assert [type(e) for e in events] == [MoveSeen]


def test_a_previous_host_that_holds_nothing_is_not_kept():
    p = Placement()
    p.set_word('v', Word('h3', previous='h2'))
    assert p.words['v'] == Word('h3')
    assert p.plug('h2', {}, {'v': 5})[1] == [
        ClaimRefused('v', 'h2', Word('h3'))]
