"""Who made an echo's duplicate, read from the guest's taps (pure)."""
from vwlab.capture import Datagram
from forensics.duplicate_audit import OURS, explain

GUEST, FAR = '10.91.0.1', '10.91.0.2'
TAPS = {('h1', 'vnet0'), ('h2', 'vnet3')}


def into(q, host='h1', tap='vnet0'):
    """The request `q` handed to the guest on a tap."""
    return Datagram(1.0, host, tap, True, FAR, GUEST, 40000, 7000,
                    q.to_bytes(8, 'big') + bytes(8), None)


def out_of(q, host='h1', tap='vnet0'):
    """The guest's echo of `q`, leaving it on a tap."""
    return Datagram(1.0, host, tap, False, GUEST, FAR, 7000, 40000,
                    q.to_bytes(8, 'big') + bytes(8), None)


def test_each_duplicate_is_told_by_what_the_taps_saw():
    grams = [
        into(1), into(1, 'h2', 'vnet3'), out_of(1), out_of(1, 'h2', 'vnet3'),
        into(2), out_of(2), out_of(2),            # the guest sent it twice
        into(3), out_of(3),                       # doubled on the way back
        into(5), out_of(5),                       # not a duplicate
        # a tap not the guest's, and the far VM's copy: not counted
        into(4, 'h3', 'vnet9'), into(4, 'h3', 'vnet9'),
    ]
    assert explain([1, 2, 3, 4], grams, GUEST, 7000, TAPS) == {
        1: 'handed twice', 2: 'echoed twice', 3: 'network',
        4: 'not captured'}


def test_only_the_guests_own_doubles_are_not_ours():
    assert [c for c in ('handed twice', 'echoed twice', 'network',
                        'not captured') if c not in OURS] == ['echoed twice']
