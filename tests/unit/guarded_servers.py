"""A REST server and an OpenFlow listener as the daemons run them (api.server,
southbound.of_listener), with small limits and a 1 s deadline, for
test_listen_guard. Run as a script under either hub:
`OSKEN_HUB_TYPE=eventlet python guarded_servers.py KEY CERT CA`. Prints
{"rest": port, "openflow": port} once both listen; GET /refusals answers
the refusals counted so far; GET /nofile?n=N sets this process's file
limit (N under 1,000: that many more than are open) (to run it out of descriptors)."""
import json
import os
import resource
import sys


def main(key, cert, ca):
    os.environ.setdefault('OSKEN_HUB_TYPE', 'eventlet')
    from os_ken.lib import hub
    hub.patch(thread=False)
    from virtualwire.api.server import make_server
    from virtualwire.listen_guard import Limits, Refusals
    from virtualwire.southbound import of_listener
    from virtualwire.tls import TlsFiles

    tls = TlsFiles(key, cert, ca)
    refusals = Refusals()

    def app(environ, start_response):
        path, q = environ['PATH_INFO'], environ.get('QUERY_STRING', '')
        if path == '/nofile':
            n = int(q.split('=')[1])
            if n < 1000:        # that many more than are open now
                n += len(os.listdir('/proc/self/fd'))
            resource.setrlimit(resource.RLIMIT_NOFILE,
                               (n, resource.getrlimit(
                                   resource.RLIMIT_NOFILE)[1]))
        body = json.dumps({'%s/%s' % k: v for k, v in
                           refusals.counts.items()}).encode()
        start_response('200 OK', [('Content-Type', 'application/json'),
                                  ('Content-Length', str(len(body)))])
        return [body]

    rest = make_server('127.0.0.1', 0, app, tls=tls, refusals=refusals,
                       limits=Limits(per_client=4, total=8), deadline=1.0)
    of = of_listener.Listener(tls, None, refusals,
                              limits=Limits(per_client=4, total=6),
                              deadline=1.0)
    import socket
    probe = socket.socket()
    probe.bind(('127.0.0.1', 0))
    of_port = probe.getsockname()[1]
    probe.close()
    threads = [hub.spawn(rest.serve_forever), hub.spawn(of.serve, '127.0.0.1',
                                                        of_port)]
    hub.sleep(0.3)
    port = rest.server.getsockname()[1] if hasattr(rest, 'server') \
        else rest.server_address[1]
    print(json.dumps({'rest': port, 'openflow': of_port}), flush=True)
    hub.joinall(threads)


if __name__ == '__main__':
    main(*sys.argv[1:4])
