"""Which way a database's schema stands from ours: a conversion only ever
goes up. A controller or package rolled back (N against a database N+1
made) must not convert the database down: OVSDB would drop the newer
tables and columns, and what the newer version stored in them. N reads a
newer database as it is (the IDL takes the tables it knows)."""


def parse(text):
    try:
        return tuple(int(x) for x in text.strip().split('.'))
    except ValueError:
        raise ValueError('not a schema version: %r' % text) from None


def compare(db, ours):
    """'same', 'older' (the database: convert it up) or 'newer' (leave
    it)."""
    a, b = parse(db), parse(ours)
    return 'same' if a == b else 'older' if a < b else 'newer'
