"""Settings every controller instance shares (`core.shared_settings`,
`control.shared_settings`): the intent database's word over an
instance's flags, seeded by the active instance only, applied on the
control loop; bad values refused, naming the setting."""
import pytest

from virtualwire.control.shared_settings import SettingsWatch, apply
from virtualwire.core import errors, shared_settings
from virtualwire.main import parse_args

FLAGS = shared_settings.from_flags(parse_args(['--hold', 'on',
                                               '--move-timeout', '30']))


def test_bad_values_and_names_are_refused_saying_what_they_take():
    for name, text, says in (
            ('move-timeout', '0', 'move-timeout must be 0.001 to inf seconds'),
            ('stats-interval', 'fast', 'stats-interval must be a number'),
            ('hold', 'yes', 'hold must be on, off or hosts'),
            ('hold-frames', '1.5', 'hold-frames must be a whole number'),
            ('colour', 'red', "no shared setting 'colour'; there are: ")):
        with pytest.raises(errors.Invalid) as e:
            shared_settings.parse(name, text)
        assert says in e.value.message
    assert shared_settings.parse('hold-rate', '0') == 0


def test_the_row_rules_a_bad_row_value_falls_back_and_says_so():
    eff = shared_settings.effective({'move-timeout': '60', 'hold': 'maybe'},
                                    FLAGS)
    assert eff['move-timeout'] == (60.0, 'intent database')
    assert eff['hold'][0] == 'on' and 'database value refused' in \
        eff['hold'][1]
    assert eff['stats-interval'] == (2.0, 'flag')
    assert shared_settings.seed({'hold': 'off'}, FLAGS) == {
        n: v for n, v in FLAGS.items() if n != 'hold'}


class Store:
    def __init__(self, options=None, available=True):
        self.options_, self.avail, self.writes = dict(options or {}), \
            available, []

    def available(self):
        return self.avail

    def options(self):
        return dict(self.options_)

    def update(self, changes):
        self.writes.append(changes)
        self.options_.update(changes)


class Loop:
    def __init__(self):
        self.posted = []

    def post(self, fn, *args):
        self.posted.append((fn, args))

    def assert_owner(self):
        pass


class Ctl:
    def __init__(self, active):
        self.active, self.loop = active, Loop()

        class M:
            move_timeout = 900.0
        self.moves = M()

        class R:
            rate = 5000

        class H:
            hold_frames = 512
            rate = R()
        self.holding = H()

        class T:
            hold = False
        self.tables = T()

        class C:
            interval = 2.0
        self.collector = C()


def run_posted(ctl):
    for fn, args in ctl.loop.posted:
        fn(*args)
    ctl.loop.posted.clear()


def test_a_standby_takes_the_actives_word_not_its_flags():
    store = Store()
    active = Ctl(active=True)
    SettingsWatch(store, active, FLAGS).poll()
    assert store.writes == [FLAGS]              # seeded once, by the active
    standby = Ctl(active=False)
    other_flags = dict(FLAGS, **{'move-timeout': '900.0', 'hold': 'off'})
    watch = SettingsWatch(store, standby, other_flags)
    watch.poll()
    run_posted(standby)
    assert standby.moves.move_timeout == 30.0 and standby.tables.hold is True
    assert len(store.writes) == 1               # a standby never writes
    # Changed at run time: applied at the next poll, shown with its source.
    store.update({'stats-interval': '3', 'hold-frames': '64'})
    watch.poll()
    run_posted(standby)
    assert standby.collector.interval == 3.0 and standby.holding.hold_frames == 64
    view = {v['name']: v for v in watch.view()}
    assert view['stats-interval']['value'] == '3.0'
    assert view['stats-interval']['source'] == 'intent database'
    assert view['hold']['flag'] == 'off'


def test_against_an_older_database_an_instance_keeps_its_flags(caplog):
    store = Store(available=False)
    ctl = Ctl(active=True)
    watch = SettingsWatch(store, ctl, FLAGS)
    watch.poll()
    watch.poll()
    assert store.writes == [] and ctl.loop.posted == []
    assert caplog.text.count('predates shared settings') == 1


def test_apply_reaches_every_part():
    ctl = Ctl(active=True)
    apply(ctl, {'activation-settle-ms': 40, 'hold-rate': 7, 'hold': 'on',
                'hold-bytes': 4096})
    assert ctl.moves.activation_settle == 0.04 and ctl.holding.rate.rate == 7
    assert ctl.tables.hold is True and ctl.holding.hold_bytes == 4096


def test_every_value_a_flag_takes_the_row_takes_too():
    """A controller seeds the row from its flags: none may be refused."""
    flags = shared_settings.from_flags(parse_args([
        '--move-timeout', '0.5', '--hold-frames', '65536', '--hold-rate',
        '0', '--activation-settle-ms', '1000', '--stats-interval', '5']))
    eff = shared_settings.effective(flags, flags)
    assert all(src == 'intent database' for _v, src in eff.values())
    assert eff['move-timeout'][0] == 0.5
