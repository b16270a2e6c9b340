# -*- coding: utf-8 -*-
# Copyright: contributors to specdec.serve
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One quoting rule for every value a role writes into a command line, an environment file, a
systemd unit or a file a shell reads.

Each place a value lands is a *context*; :func:`quote` returns the value written so that the
reader of that context gets back exactly the value, one word, or raises :class:`QuotingError`
when no writing can do that; :func:`problem` says why (for a settings check, which names the
variable). No context takes a control character (newline, NUL, ...): a value is one line.

``env``
    The value of ``NAME=value`` in an environment file that systemd reads (``EnvironmentFile=``)
    and a shell may source (``/etc/default/*``): double-quoted, with ``\\ " $ `` ` `` escaped by a
    backslash, the characters both readers unescape inside double quotes.
``unit``
    One argument of a systemd unit's ``ExecStart=`` (and the other command lines of a unit):
    double-quoted when it holds anything but ``[A-Za-z0-9_@+=:,./-]``, with ``\\`` and ``"``
    escaped, ``$`` written ``$$`` (no environment expansion) and ``%`` written ``%%`` (no
    specifier).
``command``
    One word of a command line that is split as a POSIX shell splits it, without a shell
    (Ansible's ``validate``, ``command`` with a string): :func:`shlex.quote`.
``split``
    One word of a value that its reader splits at whitespace and does not unquote, as systemd does
    with an unbraced ``$ARGS`` in ``ExecStart=`` (Debian's ``prometheus`` and
    ``prometheus-alertmanager`` units run ``/usr/bin/prometheus $ARGS``): no quoting survives it, so
    whitespace, quotes, backslashes, ``$`` and backquotes are refused and the value is written as
    it is. :func:`split_words` joins such words; the result is then written in the ``env`` context.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import shlex

from ansible.module_utils.six import string_types

CONTEXTS = ('env', 'unit', 'command', 'split')

_CONTROL = re.compile(r'[\x00-\x1f\x7f]')
_UNIT_PLAIN = re.compile(r'^[A-Za-z0-9_@+=:,./-]+\Z')
_ENV_ESCAPE = re.compile(r'([\\"$`])')
# what a reader that splits at whitespace and honours no quotes would split or reinterpret
_SPLIT_BAD = re.compile(r'[\s"\'\\$`]')


class QuotingError(ValueError):
    """A value that cannot be written in a context; the message says why."""


def _text(value):
    if isinstance(value, bool) or not isinstance(value, (string_types, int, float)):
        raise QuotingError('must be a string or a number, got %s' % type(value).__name__)
    return value if isinstance(value, string_types) else str(value)


def problem(value, context):
    """None when `value` can be written in `context`, else what is wrong with it (a phrase that
    follows the value in a refusal)."""
    if context not in CONTEXTS:
        raise ValueError('unknown quoting context %r (one of %s)' % (context, ', '.join(CONTEXTS)))
    try:
        text = _text(value)
    except QuotingError as exc:
        return str(exc)
    if _CONTROL.search(text):
        return 'has a control character (newline, NUL, ...); it cannot be written as one line'
    if context == 'split':
        if text == '':
            return 'must not be empty (it would vanish from the command line)'
        if _SPLIT_BAD.search(text):
            return ('has whitespace, a quote, a backslash, $ or a backquote; the command line it reaches is split at '
                    'whitespace without unquoting, so it would become more than one argument')
    return None


def quote(value, context):
    """`value` written for `context` (see the module's documentation). Raises QuotingError."""
    msg = problem(value, context)
    if msg:
        raise QuotingError(msg)
    text = _text(value)
    if context == 'env':
        return '"%s"' % _ENV_ESCAPE.sub(r'\\\1', text)
    if context == 'unit':
        if _UNIT_PLAIN.match(text):
            return text
        inner = text.replace('\\', '\\\\').replace('"', '\\"').replace('$', '$$').replace('%', '%%')
        return '"%s"' % inner
    if context == 'command':
        return shlex.quote(text)
    return text  # split: checked, written as it is


def split_words(words):
    """Words for a reader that splits at whitespace (``split``), joined by one space. Raises
    QuotingError naming the first word that would not stay one argument."""
    out = []
    for word in words:
        msg = problem(word, 'split')
        if msg:
            raise QuotingError('%r %s' % (word, msg))
        out.append(_text(word))
    return ' '.join(out)


def env_file(assignments, header=None):
    """An environment file: ``NAME="value"`` per (name, value) pair, in order, after an optional
    comment header. Names are environment variable names; values are written in the ``env``
    context. Raises QuotingError."""
    lines = []
    if header:
        if _CONTROL.search(header):
            raise QuotingError('the header has a control character')
        lines.append('# ' + header)
    for name, value in assignments:
        if not isinstance(name, string_types) or not re.match(r'^[A-Za-z_][A-Za-z0-9_]*\Z', name):
            raise QuotingError('%r is not an environment variable name' % (name,))
        lines.append('%s=%s' % (name, quote(value, 'env')))
    return '\n'.join(lines) + '\n'
