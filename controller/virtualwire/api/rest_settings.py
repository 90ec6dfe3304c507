"""The shared settings over REST (`core.shared_settings`): GET
/v1/settings (each with its value, where it comes from and the
instance's own flag), PUT /v1/settings/NAME {"value": "..."} (the
operator; checked before it is stored, every instance applies it within
a second)."""
from typing import Any

from virtualwire.api.controller_port import ControllerPort
from virtualwire.api.render import json_response, read_json_object
from virtualwire.core import errors, shared_settings


class SettingsHandlers:
    ctl: ControllerPort
    intent: Any

    def _watch(self):
        watch = getattr(self.ctl, 'settings', None)
        if watch is None:
            raise errors.Unavailable('this instance has no shared settings')
        return watch

    def list_settings(self, req):
        return json_response(200, {'settings': self._watch().view()})

    def set_setting(self, req, name):
        doc = read_json_object(req, 1024)
        unknown = set(doc) - {'value'}
        if unknown or 'value' not in doc:
            raise errors.Invalid('the body is {"value": "..."}')
        value = doc['value']
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        shared_settings.parse(name, value)      # refused before stored
        self._watch()
        self.intent.settings.update({name: value})
        return json_response(200, {'name': name, 'value': value,
                                   'source': 'intent database'})
