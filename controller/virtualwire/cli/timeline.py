"""`vwctl migrations --steps`: each vNIC's move step by step, as the
dashboard draws it: when each step happened and how long after the one
before (the copy's seconds and the switchover's milliseconds side by
side). Pure: a `GET /v1/migrations` record in, lines out."""
import time

ENDS = {'source_left': 'source left',
        'destination_left': 'destination left (aborted)',
        'timed_out': 'timed out (back to source)'}

OPTIONAL = (('source_stopped', 'source stopped'),
            ('held_released', 'held frames released'),
            ('held_delivered', 'held frames delivered'))


def vnic_steps(m, vnic):
    """[(step, when or None, note)] in the order they happened; the steps
    still to come (a migration in progress) after them."""
    steps = (m.get('steps') or {}).get(vnic, {})
    by = (m.get('activated_by') or {}).get(vnic)
    sisters = (m.get('sisters') or {}).get(vnic)
    out = [('seen in OVSDB' if m.get('found_by') == 'ovsdb' else 'announced',
            m['started_at'], ''),
           ('tap appeared', steps.get('tap_appeared'), ''),
           ('activated' + (' (%s)' % by if by else ''),
            (m.get('activated') or {}).get(vnic), ''),
           ('sisters moved', steps.get('sisters_moved'),
            ', '.join(sisters or ()))]
    # Only moves that have them (an agent's word at STOP; held frames).
    out += [(name, steps[k], '') for k, name in OPTIONAL if k in steps]
    end = next((k for k in ENDS if k in steps), None)
    out.append((ENDS[end], steps[end], '') if end else
               ('source left', None, ''))
    done = sorted((s for s in out if s[1] is not None), key=lambda s: s[1])
    todo = [s for s in out if s[1] is None]
    return done + (todo if m['state'] == 'prepared' or end is None else [])


def human(seconds):
    if seconds < 1:
        return '%.1f ms' % (seconds * 1e3) if seconds < 0.01 else \
            '%.0f ms' % (seconds * 1e3)
    return '%.1f s' % seconds


def clock(t):
    return time.strftime('%H:%M:%S', time.localtime(t)) + \
        '.%03d' % int(round((t % 1) * 1000) % 1000)


def render(m):
    sources = sorted({s for s in m['sources'].values() if s})
    lines = ['%s: %s -> %s, %s' % (m['vm'] or m['vm_uuid'],
                                   ','.join(sources) or '?',
                                   m['destination'], m['state'])]
    for v in m['vnics']:
        lines.append('  vNIC %s' % v)
        prev = None
        for name, at, note in vnic_steps(m, v):
            after = '+' + human(at - prev) if at is not None and \
                prev is not None else ''
            line = '    %-28s %-13s %-9s %s' % (
                name, clock(at) if at is not None else 'waiting', after,
                note)
            lines.append(line.rstrip())
            prev = at if at is not None else prev
    return '\n'.join(lines)
