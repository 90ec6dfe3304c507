"""Each controller instance follows the intent database's shared settings
(`core.shared_settings`): a watcher off the control loop reads the Global
row every second, and when the effective values change posts them to the
loop, which applies them to the controller's parts. The active instance
first writes its flags for settings the row lacks, so a standby started
with other flags takes the active's word, not its own."""
import logging

from virtualwire.core import errors, shared_settings

LOG = logging.getLogger(__name__)
POLL = 1.0


def apply(controller, values):
    """On the loop: the controller's parts take `values` {name: value}."""
    controller.loop.assert_owner()
    for name, v in values.items():
        if name == 'placement':
            controller.set_strict(v == shared_settings.STRICT)
        elif name == 'move-timeout':
            controller.moves.move_timeout = v
        elif name == 'hold':
            controller.tables.hold = shared_settings.hold_mode(v)
        elif name == 'hold-frames':
            controller.holding.hold_frames = v
        elif name == 'hold-bytes':
            controller.holding.hold_bytes = v
        elif name == 'hold-rate':
            controller.holding.rate.rate = v
        elif name == 'copy-log':
            controller.tables.copies_on_hosts = v == 'on'
        elif name == 'activate-at-stop':
            controller.moves.activate_at_stop = v == 'on'
        elif name == 'activation-settle-ms':
            controller.moves.activation_settle = v / 1000.0
        elif name == 'stats-interval':
            controller.collector.interval = v


class SettingsWatch:
    def __init__(self, store, controller, flags):
        self.store, self.ctl, self.flags = store, controller, flags
        # {name: (value, source)} last applied; what GET /v1/settings shows.
        self.current = shared_settings.effective({}, flags)
        self.warned = False

    def poll(self):
        """Once per POLL, off the loop (it may write the row)."""
        if not self.store.available():
            if not self.warned:
                LOG.warning('the intent database predates shared settings: '
                            'this instance runs on its own flags until it '
                            'is upgraded (virtualwire-intent-db upgrade)')
                self.warned = True
            return
        options = self.store.options()
        missing = shared_settings.seed(options, self.flags)
        if missing and self.ctl.active:
            try:
                self.store.update(missing)
            except errors.VwError as e:
                LOG.warning('could not seed shared settings: %s', e.message)
                return
            LOG.info('shared settings seeded from this instance\'s flags: '
                     '%s', ', '.join('%s=%s' % kv
                                     for kv in sorted(missing.items())))
            options = dict(options, **missing)
        now = shared_settings.effective(options, self.flags)
        changed = {n: v for n, (v, _src) in now.items()
                   if self.current.get(n, (None,))[0] != v}
        for n, (v, src) in now.items():
            if n in changed or self.current[n][1] != src:
                LOG.info('setting %s = %s (from the %s)', n, v, src)
        self.current = now
        if changed:
            self.ctl.loop.post(apply, self.ctl, changed)

    def view(self):
        """[{name, value, source, flag, help}] for REST and vwctl."""
        return [{'name': n, 'value': str(v), 'source': src,
                 'flag': self.flags[n],
                 'help': shared_settings.SETTINGS[n].help}
                for n, (v, src) in sorted(self.current.items())]
