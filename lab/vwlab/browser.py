"""A real headless browser for the lab: Debian's chromium driven by
selenium through Debian's chromedriver (no browser or driver download).

Over HTTPS it trusts exactly the controller's key (`trust_cert`: chromium's
--ignore-certificate-errors-spki-list pins that certificate's public key;
no other certificate error is ignored), as an operator's browser would
trust the deployment's CA.

It reaches only the controller on 127.0.0.1: every other host resolves to
nothing, background networking (updates, sync, safe browsing) is off."""
import base64
import hashlib
import os
import subprocess
import time

from selenium import webdriver
from selenium.common.exceptions import (NoSuchElementException,
                                        StaleElementReferenceException)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

CHROMIUM = '/usr/bin/chromium'
DRIVER = '/usr/bin/chromedriver'
FLAGS = ('--headless=new', '--no-sandbox', '--disable-gpu',
         '--disable-dev-shm-usage', '--window-size=1400,1000',
         '--disable-background-networking', '--disable-component-update',
         '--disable-sync', '--disable-default-apps', '--no-first-run',
         '--disable-features=Translate,MediaRouter,OptimizationHints',
         '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1')


def spki_pin(cert_path):
    """base64(SHA-256(SubjectPublicKeyInfo)) of a PEM certificate."""
    pub = subprocess.run(['openssl', 'x509', '-in', cert_path, '-noout',
                          '-pubkey'], capture_output=True, check=True).stdout
    der = subprocess.run(['openssl', 'pkey', '-pubin', '-outform', 'der'],
                         input=pub, capture_output=True, check=True).stdout
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


class Browser:
    def __init__(self, width=1400, height=1000, trust_cert=None):
        os.environ.setdefault('SE_AVOID_STATS', 'true')
        o = webdriver.ChromeOptions()
        o.binary_location = CHROMIUM
        for f in FLAGS:
            o.add_argument(f)
        o.add_argument('--window-size=%d,%d' % (width, height))
        if trust_cert:
            o.add_argument('--ignore-certificate-errors-spki-list=' +
                           spki_pin(trust_cert))
        o.set_capability('goog:loggingPrefs', {'browser': 'ALL'})
        self.d = webdriver.Chrome(service=Service(DRIVER), options=o)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.d.quit()

    def open(self, url):
        self.d.get(url)

    def find(self, css):
        return self.d.find_element(By.CSS_SELECTOR, css)

    def all(self, css):
        return self.d.find_elements(By.CSS_SELECTOR, css)

    def text(self, css):
        """The element's text, or None if it is not on the page (the
        dashboard redraws every second: an element may go between the
        find and the read)."""
        try:
            return self.find(css).text
        except (NoSuchElementException, StaleElementReferenceException):
            return None

    def attr(self, css, name):
        try:
            return self.find(css).get_attribute(name)
        except (NoSuchElementException, StaleElementReferenceException):
            return None

    def wait(self, fn, timeout=15.0, what='condition'):
        end, last = time.time() + timeout, None
        while time.time() < end:
            try:
                last = fn()
            except StaleElementReferenceException:
                last = None
            if last:
                return last
            time.sleep(0.1)
        raise AssertionError('browser: timed out after %.0fs waiting for %s '
                             '(last: %r)' % (timeout, what, last))

    def sign_in(self, token):
        box = self.find('#token')
        box.clear()
        box.send_keys(token)
        self.find('#signin').click()

    def errors(self):
        """The page's console errors since the last call."""
        return [e['message'] for e in self.d.get_log('browser')
                if e['level'] == 'SEVERE']

    def screenshot(self, path, full_page=True):
        """Save a PNG; full_page: the whole page, not just the window."""
        if full_page:
            h = self.d.execute_script(
                'return document.documentElement.scrollHeight')
            w = self.d.get_window_size()['width']
            self.d.set_window_size(w, max(600, min(int(h) + 120, 4000)))
        self.d.save_screenshot(str(path))
