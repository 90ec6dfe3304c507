"""docs/settings.rst is what the programs' parsers say: regenerate it with
`python -m virtualwire.settings_doc > docs/settings.rst`."""
import os

from virtualwire import settings_doc

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'docs', 'settings.rst')


def test_the_settings_reference_matches_the_parsers():
    with open(DOC) as f:
        assert f.read() == settings_doc.render(), \
            'docs/settings.rst is stale: python -m virtualwire.settings_doc ' \
            '> docs/settings.rst'


def test_every_option_and_shared_setting_is_described():
    text = settings_doc.render()
    assert '(no description)' not in text
    for name in ('move-timeout', 'stats-interval', '--intent-db',
                 '--link-rate', '--collector-token-file'):
        assert '``%s' % name in text
