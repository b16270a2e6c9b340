# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A plain-text table of a list of records, for the fleet view (the fleet_report action).

It was the public ``specdec.serve.fleet_table`` filter; no role or playbook called it, so it is internal now. Its
errors are still ``AnsibleFilterError`` with the ``fleet_table:`` prefix, as before.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError


def _cell(value):
    if value is None:
        return '-'
    if isinstance(value, bool):
        return 'yes' if value else 'no'
    if isinstance(value, float):
        return ('%.2f' % value).rstrip('0').rstrip('.')
    text = str(value)
    return ' '.join(text.split()) or '-'


def fleet_table(rows, columns, max_width=60):
    """Render ``rows`` (a list of mappings) as a left-aligned text table.

    ``columns`` is a list of ``[key, header]`` pairs (or plain keys, used as their own header).
    Missing or empty values show as ``-``; cells longer than ``max_width`` are cut with ``...``.
    """
    if not isinstance(rows, (list, tuple)):
        raise AnsibleFilterError('fleet_table: rows must be a list of mappings, got %s' % type(rows).__name__)
    if not isinstance(columns, (list, tuple)) or not columns:
        raise AnsibleFilterError('fleet_table: columns must be a non-empty list of [key, header] pairs')
    try:
        max_width = int(max_width)
    except (TypeError, ValueError):
        raise AnsibleFilterError('fleet_table: max_width must be an integer, got %r' % (max_width,))
    if max_width < 4:
        raise AnsibleFilterError('fleet_table: max_width must be at least 4, got %d' % max_width)
    spec = []
    for col in columns:
        if isinstance(col, str):
            spec.append((col, col.upper()))
        elif isinstance(col, (list, tuple)) and len(col) == 2:
            spec.append((str(col[0]), str(col[1])))
        else:
            raise AnsibleFilterError('fleet_table: each column is a key or a [key, header] pair, got %r' % (col,))
    table = [[header for dummy, header in spec]]
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise AnsibleFilterError('fleet_table: row %d is not a mapping: %r' % (index, row))
        cells = []
        for key, dummy in spec:
            text = _cell(row.get(key))
            if len(text) > max_width:
                text = text[:max_width - 3] + '...'
            cells.append(text)
        table.append(cells)
    widths = [max(len(r[i]) for r in table) for i in range(len(spec))]
    lines = []
    for n, cells in enumerate(table):
        lines.append('  '.join(c.ljust(w) for c, w in zip(cells, widths)).rstrip())
        if n == 0:
            lines.append('  '.join('-' * w for w in widths))
    return '\n'.join(lines)
