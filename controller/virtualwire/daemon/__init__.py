"""The one daemon module: what the controller, the collector and the
extender agent share to start, read their inputs, reload and stop
(lifecycle: logging, the hub, SIGHUP, SIGTERM; inputs: listen addresses,
tokens, TLS files, the intent database's remote)."""
from virtualwire.daemon.inputs import (check_intent_remote, load_tls,
                                       poll_forever, read_or_create_token,
                                       read_token,
                                       split_listen, trusted_intent_remote)
from virtualwire.daemon.lifecycle import (FORMAT, RELOADABLE, JsonFormatter,
                                          add_intent_db_tls,
                                          add_log_arguments, add_tls_files,
                                          configure_logging, on_sighup,
                                          reload, run_until_stopped, start)

__all__ = ['FORMAT', 'JsonFormatter', 'RELOADABLE', 'add_intent_db_tls',
           'add_log_arguments', 'add_tls_files', 'check_intent_remote',
           'configure_logging', 'load_tls', 'on_sighup', 'poll_forever',
           'read_or_create_token', 'read_token', 'reload', 'run_until_stopped',
           'split_listen', 'start', 'trusted_intent_remote']
