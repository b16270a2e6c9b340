# -*- coding: utf-8 -*-
# Copyright (c) specdec.serve contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Generate the per-version engine tables that spec_config validates against.

The tables are data extracted from the engines' own Python source with ``ast``; the engine is never
imported or run, and no upstream code is copied. One JSON file per engine version is written to
``plugins/plugin_utils/engine_tables/<engine>-<version>.json`` and ``index.json`` lists them.

TensorRT-LLM (root class ``TorchLlmArgs``, the PyTorch backend's LLM args), from a source tree that
holds ``tensorrt_llm/llmapi/llm_args.py`` (a checkout, or any tree with the package's source)::

    python3 scripts/engine_tables.py trtllm --version 1.3.0rc3 --root SRC \\
        --source 'https://github.com/OWNER/REPO' --commit SHA [--prefix DIR/]

(``--prefix``: where the tensorrt_llm package sits inside SRC, when it is not at its top)

or from the rendered source page of the versioned documentation (``<ver>/_modules/tensorrt_llm/
llmapi/llm_args.html`` of the gh-pages branch; classes of other modules are then opaque)::

    python3 scripts/engine_tables.py trtllm --version 1.2.1 --html llm_args.html --source URL

vLLM (``SpeculativeConfig`` and the ``--speculative-config`` method literal, plus the engine CLI
options), from a released wheel (``pip download --no-deps vllm==X``) or an unpacked tree::

    python3 scripts/engine_tables.py vllm --version 0.11.0 --wheel vllm-0.11.0-*.whl

or every release in the supported range, each wheel read from PyPI by HTTP range requests (only the zip index and
the few modules the table needs are transferred, not the 200-400 MB wheel); consecutive releases whose facts are
identical share one file, which lists the releases it covers::

    python3 scripts/engine_tables.py vllm-releases [--missing-only]

or (TensorRT-LLM) from a condensed transcription of a release's rendered ``llm_args`` page (its declarations
only, as ``SRC/tensorrt_llm/llmapi/llm_args.py``), with the serve options read off the release's trtllm-serve
page; the table records the kind::

    python3 scripts/engine_tables.py trtllm --version 1.3.0rc13 --root SRC --source URL --commit SHA \\
        --serve-cli cli-1.3.0rc13.json --source-kind condensed-transcription-of-rendered-html

or from the per-release facts extracted from a release's rendered ``llm_args`` and ``trtllm-serve`` pages
(a condensed transcription of those pages, not parsed source: the table records ``source_kind``), with
the serve subcommand's options as read from that release's CLI page (names, metavar or flag, choices)::

    python3 scripts/engine_tables.py trtllm-facts --facts 1.2.1.json --serve-cli cli-1.2.1.json \
        [--version 1.2.0rc6]     (when the facts are of a post release: 1.2.0rc6.post1 for 1.2.0rc6)

Record a version that could not be sourced (listed in index.json, no table)::

    python3 scripts/engine_tables.py missing trtllm 1.2.0rc6 --reason '...'
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import ast
import hashlib
import html
import io
import json
import os
import re
import sys
import urllib.request
import zipfile

SCHEMA_VERSION = 1
OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, 'plugins', 'plugin_utils',
                       'engine_tables')

_SIMPLE = {
    'int': 'int', 'float': 'float', 'str': 'str', 'bool': 'bool', 'bytes': 'str',
    'Path': 'path', 'PathLike': 'path', 'Any': 'any', 'object': 'any', 'NoneType': 'none',
    'dict': 'dict', 'Dict': 'dict', 'Mapping': 'dict', 'MutableMapping': 'dict',
    'list': 'list', 'List': 'list', 'Sequence': 'list', 'Set': 'list', 'set': 'list', 'tuple': 'list',
    'Tuple': 'list', 'FrozenSet': 'list', 'frozenset': 'list', 'Iterable': 'list',
}
# pydantic's constrained number types: the kind, and the bounds they add to a field
_CONSTRAINED = {'PositiveInt': ('int', {'gt': 0}), 'NonNegativeInt': ('int', {'ge': 0}),
                'NegativeInt': ('int', {'lt': 0}), 'NonPositiveInt': ('int', {'le': 0}),
                'PositiveFloat': ('float', {'gt': 0}), 'NonNegativeFloat': ('float', {'ge': 0}),
                'NegativeFloat': ('float', {'lt': 0}), 'NonPositiveFloat': ('float', {'le': 0})}
_SIMPLE.update((name, kind) for name, (kind, dummy) in _CONSTRAINED.items())
_SIMPLE.update({'StrictInt': 'int', 'StrictFloat': 'float', 'StrictBool': 'bool', 'StrictStr': 'str'})
_WRAPPERS = ('Annotated', 'SkipValidation', 'Required', 'NotRequired', 'Final')
_MODEL_BASES = ('BaseModel', 'StrictBaseModel')
_ENUM_BASES = ('Enum', 'StrEnum', 'IntEnum', 'str_enum', 'IntFlag')


# ----------------------------------------------------------------------------------- source access

class HttpRangeFile(io.RawIOBase):
    """A remote file read by HTTP range requests, seekable, for zipfile: a wheel's central directory and the
    members a table needs come over the network, the rest of the wheel never does."""

    BLOCK = 256 * 1024

    def __init__(self, url, opener=urllib.request.urlopen):
        super().__init__()
        self.url = url
        self.opener = opener
        with opener(urllib.request.Request(url, method='HEAD'), timeout=60) as response:
            if response.headers.get('Accept-Ranges', '').lower() != 'bytes':
                raise SystemExit('%s: the server does not take range requests' % url)
            self.size = int(response.headers['Content-Length'])
        self.pos = 0
        self.blocks = {}
        self.requests = 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self.pos

    def seek(self, offset, whence=io.SEEK_SET):
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def _block(self, number):
        if number not in self.blocks:
            start = number * self.BLOCK
            end = min(self.size, start + self.BLOCK) - 1
            request = urllib.request.Request(self.url, headers={'Range': 'bytes=%d-%d' % (start, end)})
            with self.opener(request, timeout=120) as response:
                if response.status != 206:
                    raise SystemExit('%s: range request answered %s, not 206' % (self.url, response.status))
                data = response.read()
            if len(data) != end - start + 1:
                raise SystemExit('%s: asked for bytes %d-%d, got %d bytes' % (self.url, start, end, len(data)))
            self.blocks[number] = data
            self.requests += 1
        return self.blocks[number]

    def readinto(self, buffer):
        view = memoryview(buffer).cast('B')
        count = 0
        while count < len(view) and self.pos < self.size:
            block = self._block(self.pos // self.BLOCK)
            offset = self.pos % self.BLOCK
            chunk = block[offset:offset + len(view) - count]
            view[count:count + len(chunk)] = chunk
            count += len(chunk)
            self.pos += len(chunk)
        return count


class Source:
    """Module name -> source text, from a directory, a wheel or one HTML page."""

    def __init__(self, root=None, wheel=None, html_page=None, html_module=None, prefix=''):
        self.root = root
        # a wheel: its path, or an open seekable file (HttpRangeFile)
        self.zip = zipfile.ZipFile(wheel) if wheel else None
        self.prefix = prefix
        self.pages = {}
        if html_page:
            with open(html_page, 'rb') as handle:
                self.pages[html_module] = source_from_viewcode_html(handle.read().decode('utf-8'))

    def files_for(self, module):
        rel = module.replace('.', '/')
        return [rel + '.py', rel + '/__init__.py']

    def text(self, module):
        if module in self.pages:
            return self.pages[module]
        for rel in self.files_for(module):
            if self.zip is not None:
                try:
                    return self.zip.read(rel).decode('utf-8')
                except KeyError:
                    continue
            elif self.root:
                path = os.path.join(self.root, self.prefix, rel)
                if os.path.isfile(path):
                    with open(path, 'rb') as handle:
                        return handle.read().decode('utf-8')
        return None

    def path_of(self, module):
        if module in self.pages:
            return 'viewcode page of ' + module
        for rel in self.files_for(module):
            if self.zip is not None and rel in self.zip.namelist():
                return rel
            if self.root and os.path.isfile(os.path.join(self.root, self.prefix, rel)):
                return self.prefix + rel
        return None


def source_from_viewcode_html(page):
    """The Python source shown by a Sphinx viewcode page (``_modules/…html``)."""
    start = page.find('<div class="highlight"><pre>')
    if start < 0:
        raise ValueError('not a Sphinx viewcode page: no highlight block')
    end = page.find('</pre></div>', start)
    body = page[start + len('<div class="highlight"><pre>'):end]
    body = re.sub(r'<a class="viewcode-back"[^>]*>.*?</a>', '', body, flags=re.S)
    body = re.sub(r'<[^>]+>', '', body)
    return html.unescape(body)


class Module:
    def __init__(self, name, tree, is_package=False):
        self.name = name
        self.is_package = is_package
        self.classes = {}
        self.aliases = {}
        self.imports = {}
        self.functions = {}
        for node in tree.body:
            self._visit(node)

    def _visit(self, node):
        if isinstance(node, ast.ClassDef):
            self.classes[node.name] = node
        elif isinstance(node, ast.FunctionDef):
            self.functions[node.name] = node  # the last definition wins (typing overloads come first)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            self.aliases[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            self.aliases[node.target.id] = node.value
        elif isinstance(node, ast.ImportFrom):
            base = self._absolute(node.module, node.level)
            for alias in node.names:
                self.imports[alias.asname or alias.name] = (base, alias.name)
        elif isinstance(node, ast.If):  # TYPE_CHECKING blocks, version switches
            for sub in node.body + node.orelse:
                self._visit(sub)
        elif isinstance(node, ast.Try):
            for sub in node.body:
                self._visit(sub)

    def _absolute(self, module, level):
        if not level:
            return module
        parts = self.name.split('.')
        base = parts[:len(parts) - level] if not self._is_package() else parts[:len(parts) - level + 1]
        return '.'.join(base + ([module] if module else []))

    def _is_package(self):
        return self.is_package


# ----------------------------------------------------------------------------------- extraction

def _const(node):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _jsonable(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, list):
        return all(_jsonable(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _jsonable(v) for k, v in value.items())
    return False


def _simple(kind):
    if kind == 'list':
        return {'kind': 'list', 'item': {'kind': 'any'}}
    if kind == 'dict':
        return {'kind': 'dict', 'key': {'kind': 'any'}, 'value': {'kind': 'any'}}
    return {'kind': kind}


def _call_name(node):
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


class Extractor:
    def __init__(self, source):
        self.source = source
        self.modules = {}
        self.classes = {}        # qualified name -> table entry
        self.enums = {}
        self.names = {}          # class node id -> short name used in the tables
        self.queue = []
        self.unresolved = set()
        self.files = {}
        self.dispatchers = {}    # base class name -> its from_dict dispatch
        self.tag_rules = {}      # '<class>.<field>' -> the rule a before-validator fills a missing tag by
        self.internal_classes = ()

    # -- modules and names
    def module(self, name):
        if name not in self.modules:
            text = self.source.text(name)
            if text is None:
                self.modules[name] = None
            else:
                path = self.source.path_of(name)
                self.modules[name] = Module(name, ast.parse(text), bool(path and path.endswith('__init__.py')))
                self.files[name] = (path, hashlib.sha256(text.encode('utf-8')).hexdigest())
        return self.modules[name]

    def lookup(self, module, name, depth=0):
        """(kind, module, node) for a name seen in module: kind is 'class', 'alias' or None."""
        if depth > 8 or module is None:
            return None, None, None
        if name in module.classes:
            return 'class', module, module.classes[name]
        if name in module.aliases:
            return 'alias', module, module.aliases[name]
        if name in module.imports:
            target_mod, target_name = module.imports[name]
            mod = self.module(target_mod) if target_mod else None
            if mod is None and target_mod:
                # "from pkg import mod" style: the name may be a module itself
                mod = self.module(target_mod + '.' + target_name)
                if mod is not None:
                    return 'module', mod, None
            return self.lookup(mod, target_name, depth + 1)
        return None, None, None

    def base_names(self, module, node, seen=None):
        """Names of every ancestor of a class, following imports."""
        seen = seen if seen is not None else set()
        out = []
        for base in node.bases:
            name = _call_name(base) if not isinstance(base, ast.Subscript) else _call_name(base.value)
            if not name or name in seen:
                continue
            seen.add(name)
            out.append(name)
            kind, mod, sub = self.lookup(module, name)
            if kind == 'class':
                out.extend(self.base_names(mod, sub, seen))
        return out

    def decorator_extra(self, module, node):
        """(is_dataclass_maker, extra) of a class decorator defined in the source (vLLM's @config)."""
        for deco in node.decorator_list:
            name = _call_name(deco)
            if not name or name == 'dataclass':
                continue
            mod = module
            if name in module.imports:
                target_mod, target_name = module.imports[name]
                mod, name = self.module(target_mod) if target_mod else None, target_name
            func = mod.functions.get(name) if mod is not None else None
            if func is None:
                continue
            makes = any(isinstance(c, ast.Call) and _call_name(c) == 'dataclass' for c in ast.walk(func))
            extra = None
            for c in ast.walk(func):
                if isinstance(c, ast.Call) and _call_name(c) == 'ConfigDict':
                    for kw in c.keywords:
                        if kw.arg == 'extra' and isinstance(_const(kw.value), str):
                            extra = _const(kw.value)
            if makes:
                return True, extra
        return False, None

    def class_kind(self, module, node):
        names = self.base_names(module, node)
        decorators = [_call_name(d) for d in node.decorator_list]
        if any(n in _ENUM_BASES for n in names) or any('Enum' in (n or '') for n in names):
            return 'enum'
        if any(n in _MODEL_BASES for n in names):
            return 'pydantic'
        if 'dataclass' in decorators:
            mod_imports = module.imports.get('dataclass', ('', ''))
            return 'pydantic_dataclass' if (mod_imports[0] or '').startswith('pydantic') else 'dataclass'
        if self.decorator_extra(module, node)[0]:
            return 'pydantic_dataclass'
        return None

    # -- types
    def type_of(self, module, node):
        if node is None:
            return {'kind': 'any'}
        if isinstance(node, ast.Constant):
            if node.value is None:
                return {'kind': 'none'}
            if isinstance(node.value, str):
                try:
                    return self.type_of(module, ast.parse(node.value, mode='eval').body)
                except SyntaxError:
                    return {'kind': 'opaque', 'name': node.value}
            if node.value is Ellipsis:
                return {'kind': 'any'}
            return {'kind': 'literal', 'values': [node.value]}
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self._union([self.type_of(module, node.left), self.type_of(module, node.right)])
        if isinstance(node, ast.Attribute):
            if node.attr in _SIMPLE and isinstance(node.value, ast.Name) and node.value.id in ('typing', 'os', 'pathlib'):
                return _simple(_SIMPLE[node.attr])
            return {'kind': 'opaque', 'name': ast.unparse(node)}
        if isinstance(node, ast.Name):
            return self._named(module, node.id)
        if isinstance(node, ast.Subscript):
            head = _call_name(node.value)
            args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if head == 'SkipValidation':
                # pydantic does not validate it; engine objects (ModelConfig, ...) are set internally
                inner = args[0]
                name = _call_name(inner) if not isinstance(inner, ast.Subscript) else None
                if name and name not in _SIMPLE:
                    return {'kind': 'opaque', 'name': name, 'internal': True}
                return self.type_of(module, inner)
            if head == 'Annotated':
                # a discriminated union (Field(discriminator=...)): the key's literal picks the class
                inner = self.type_of(module, args[0])
                for meta in args[1:]:
                    if isinstance(meta, ast.Call) and _call_name(meta) in ('Field', 'PydanticField'):
                        for kw in meta.keywords:
                            if kw.arg == 'discriminator' and isinstance(_const(kw.value), str):
                                inner = dict(inner, discriminator=_const(kw.value))
                return inner
            if head in _WRAPPERS:
                return self.type_of(module, args[0])
            if head == 'Optional':
                return self._union([self.type_of(module, args[0]), {'kind': 'none'}])
            if head == 'Union':
                return self._union([self.type_of(module, a) for a in args])
            if head == 'Literal':
                values = []
                for a in args:
                    if isinstance(a, ast.Constant):
                        values.append(a.value)
                        continue
                    t = self.type_of(module, a)
                    values.extend(t.get('values', []) if t['kind'] == 'literal' else [])
                return {'kind': 'literal', 'values': values}
            if head in ('ClassVar', 'InitVar'):
                return {'kind': 'classvar'}
            simple = _SIMPLE.get(head)
            if simple == 'list':
                items = [a for a in args if not (isinstance(a, ast.Constant) and a.value is Ellipsis)]
                return {'kind': 'list', 'item': self._union([self.type_of(module, a) for a in items])
                        if items else {'kind': 'any'}}
            if simple == 'dict':
                return {'kind': 'dict', 'key': self.type_of(module, args[0]),
                        'value': self.type_of(module, args[1]) if len(args) > 1 else {'kind': 'any'}}
            return {'kind': 'opaque', 'name': ast.unparse(node)}
        return {'kind': 'opaque', 'name': ast.unparse(node)}

    def _named(self, module, name, depth=0):
        if name == 'None':
            return {'kind': 'none'}
        kind, mod, node = self.lookup(module, name)
        if name in self.internal_classes:
            return {'kind': 'opaque', 'name': name, 'internal': True}
        if kind == 'class':
            ckind = self.class_kind(mod, node)
            if ckind == 'enum':
                self.enums.setdefault(name, self.enum_values(node))
                return {'kind': 'enum', 'name': name}
            if ckind:
                if name not in self.classes and (mod.name, name) not in self.queue:
                    self.queue.append((mod.name, name))
                return {'kind': 'class', 'name': name}
            return {'kind': 'opaque', 'name': name}
        if kind == 'alias' and depth < 8:
            if isinstance(node, ast.Call):  # TypeVar(...), NewType(...)
                return {'kind': 'opaque', 'name': name}
            return self.type_of(mod, node)
        if name in _SIMPLE:
            return _simple(_SIMPLE[name])
        self.unresolved.add(name)
        return {'kind': 'opaque', 'name': name}

    @staticmethod
    def _union(options):
        flat = []
        discriminator = [o['discriminator'] for o in options if o.get('discriminator')]
        for opt in options:
            for o in (opt['options'] if opt['kind'] == 'union' else [opt]):
                if o not in flat:
                    flat.append(o)
        literals = [o for o in flat if o['kind'] == 'literal']
        if len(literals) > 1:
            merged = {'kind': 'literal', 'values': [v for o in literals for v in o['values']]}
            flat = [o for o in flat if o['kind'] != 'literal'] + [merged]
        out = flat[0] if len(flat) == 1 else {'kind': 'union', 'options': flat}
        if discriminator and out['kind'] == 'union':
            out['discriminator'] = discriminator[0]
        return out

    @staticmethod
    def enum_values(node):
        values = []
        for stmt in node.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                name = stmt.targets[0].id
                if name.startswith('_'):
                    continue
                value = _const(stmt.value)
                if value is None and _call_name(stmt.value) == 'auto':
                    value = name.lower()
                if isinstance(value, (str, int)):
                    values.append(value)
        return values

    # -- classes
    def extra_of(self, module, node, kind):
        for deco in node.decorator_list:
            if isinstance(deco, ast.Call):
                for kw in deco.keywords:
                    if kw.arg == 'config' and isinstance(kw.value, ast.Call):
                        for k2 in kw.value.keywords:
                            if k2.arg == 'extra':
                                return _const(k2.value)
        for stmt in node.body:
            if isinstance(stmt, ast.ClassDef) and stmt.name == 'Config':
                for sub in stmt.body:
                    if isinstance(sub, ast.Assign) and any(getattr(t, 'id', None) == 'extra' for t in sub.targets):
                        return _const(sub.value)
            if isinstance(stmt, ast.Assign) and any(getattr(t, 'id', None) == 'model_config' for t in stmt.targets):
                if isinstance(stmt.value, ast.Call):
                    for kw in stmt.value.keywords:
                        if kw.arg == 'extra':
                            return _const(kw.value)
        made, extra = self.decorator_extra(module, node)
        if made and extra is not None:
            return extra
        for base in node.bases:
            name = _call_name(base)
            bkind, bmod, bnode = self.lookup(module, name) if name else (None, None, None)
            if bkind == 'class':
                found = self.extra_of(bmod, bnode, kind)
                if found is not None:
                    return found
        return None

    def own_fields(self, module, node):
        fields = {}
        classvars = {}
        for stmt in node.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            name = stmt.target.id
            is_classvar = isinstance(stmt.annotation, ast.Subscript) and _call_name(stmt.annotation.value) == 'ClassVar'
            if name.startswith('_') and not is_classvar:
                continue
            ann = {'kind': 'classvar'} if is_classvar else self.type_of(module, stmt.annotation)
            if ann['kind'] == 'classvar':
                if stmt.value is not None and isinstance(_const(stmt.value), (str, int)):
                    classvars[name] = _const(stmt.value)
                continue
            if name.startswith('_'):
                continue
            entry = {'type': ann, 'required': stmt.value is None}
            value = stmt.value
            if isinstance(value, ast.Call) and _call_name(value) in ('Field', 'PydanticField', 'field'):
                kws = dict((kw.arg, kw.value) for kw in value.keywords if kw.arg)
                has_default = 'default' in kws or 'default_factory' in kws or (
                    value.args and not (isinstance(value.args[0], ast.Constant) and value.args[0].value is Ellipsis))
                entry['required'] = not has_default
                default_node = kws.get('default', value.args[0] if value.args else None)
                if default_node is not None and _const(default_node) is not None:
                    entry['default'] = _const(default_node)
                aliases = []
                for key in ('alias', 'validation_alias'):
                    if key in kws:
                        node_a = kws[key]
                        if isinstance(node_a, ast.Call) and _call_name(node_a) == 'AliasChoices':
                            aliases.extend(_const(a) for a in node_a.args if isinstance(_const(a), str))
                        elif isinstance(_const(node_a), str):
                            aliases.append(_const(node_a))
                aliases = [a for a in aliases if a != name]
                if aliases:
                    entry['aliases'] = sorted(set(aliases))
                bounds = dict((k, _const(kws[k])) for k in ('ge', 'gt', 'le', 'lt')
                              if k in kws and isinstance(_const(kws[k]), (int, float)))
                bounds = dict(self.constrained(stmt.annotation), **bounds)
                if bounds:
                    entry['bounds'] = bounds
                if isinstance(_const(kws.get('status')), str):
                    entry['status'] = _const(kws['status'])
            elif value is not None and _const(value) is not None:
                entry['default'] = _const(value)
            if 'bounds' not in entry and self.constrained(stmt.annotation):
                entry['bounds'] = self.constrained(stmt.annotation)
            if entry.get('default', None) is Ellipsis:
                entry.pop('default')
                entry['required'] = True
            if 'default' in entry and not _jsonable(entry['default']):
                entry['default'] = repr(entry['default'])
            fields[name] = entry
        return fields, classvars

    @staticmethod
    def constrained(annotation):
        """The bounds a constrained pydantic type in the annotation adds (``Optional[PositiveInt]``: gt 0)."""
        bounds = {}
        for node in ast.walk(annotation):
            if isinstance(node, ast.Name) and node.id in _CONSTRAINED:
                bounds.update(_CONSTRAINED[node.id][1])
        return bounds

    def collect(self, module_name, name):
        module = self.module(module_name)
        node = module.classes[name]
        kind = self.class_kind(module, node)
        merged = {}
        classvars = {}
        chain = []
        for base in reversed(self._linear(module, node)):
            bmod, bnode = base
            f, cv = self.own_fields(bmod, bnode)
            merged.update(f)
            classvars.update(cv)
            chain.append(bnode.name)
        extra = self.extra_of(module, node, kind)
        if extra is None:
            # pydantic ignores unknown keys unless told otherwise; a plain dataclass is built with
            # keyword arguments, so an unknown key is a TypeError
            extra = 'ignore' if kind in ('pydantic', 'pydantic_dataclass') else 'forbid'
        entry = {
            'module': module_name,
            'kind': kind,
            'extra': extra,
            'bases': list(reversed(chain[:-1])),
            'fields': dict(sorted(merged.items())),
        }
        if classvars:
            entry['classvars'] = classvars
        for bmod, bnode in self._linear(module, node):
            dispatch = self.dispatch_of(bmod, bnode)
            if dispatch and bnode.name not in self.dispatchers:
                dispatch['base'] = bnode.name
                self.dispatchers[bnode.name] = dispatch
        backends = self.backend_rule(node)
        if backends:
            entry['backends'] = backends
        for bmod, bnode in self._linear(module, node):
            for field, rule in self.value_rules(bmod, bnode).items():
                if field in entry['fields']:
                    entry['fields'][field].setdefault('value_rule', rule)
            for field, rule in self.inferred_tags(bnode).items():
                if field in entry['fields']:
                    self.tag_rules.setdefault('%s.%s' % (name, field), rule)
        self.classes[name] = entry

    @staticmethod
    def inferred_tags(node):
        """{field: rule} of the before-validators that fill in a missing tag of a discriminated union
        (1.3.0rc18's ``infer_cuda_graph_config_mode``)::

            v["mode"] = "encode" if any(k in v and v[k] not in (None, 0) for k in {"num_tokens", ...}) else "decode"

        gives ``{"key": "mode", "when_any": [...], "value": "encode", "otherwise": "decode"}``: the value when any
        of those keys is set (not None, not 0), else the other."""
        rules = {}
        for stmt in node.body:
            if not isinstance(stmt, ast.FunctionDef):
                continue
            before = [d for d in stmt.decorator_list if isinstance(d, ast.Call) and _call_name(d) == 'field_validator'
                      and any(kw.arg == 'mode' and _const(kw.value) == 'before' for kw in d.keywords)]
            if not before:
                continue
            fields = [_const(a) for a in before[0].args if isinstance(_const(a), str)]
            sets = {}
            for sub in ast.walk(stmt):
                if isinstance(sub, ast.Assign) and isinstance(sub.targets[0], ast.Name) and isinstance(sub.value, ast.Set):
                    sets[sub.targets[0].id] = [_const(e) for e in sub.value.elts if isinstance(_const(e), str)]
            for sub in ast.walk(stmt):
                if not (isinstance(sub, ast.Assign) and isinstance(sub.targets[0], ast.Subscript)
                        and isinstance(_const(sub.targets[0].slice), str) and isinstance(sub.value, ast.IfExp)):
                    continue
                then, other = _const(sub.value.body), _const(sub.value.orelse)
                names = [n.id for n in ast.walk(sub.value.test) if isinstance(n, ast.Name) and n.id in sets]
                literal = [e for n in ast.walk(sub.value.test) if isinstance(n, ast.Set)
                           for e in (_const(x) for x in n.elts) if isinstance(e, str)]
                keys = sorted(set(literal + [k for n in names for k in sets[n]]))
                if isinstance(then, str) and isinstance(other, str) and keys:
                    for field in fields:
                        rules[field] = {'key': _const(sub.targets[0].slice), 'when_any': keys, 'value': then,
                                        'otherwise': other}
        return rules

    def value_rules(self, module, node):
        """{field: rule} of the field validators whose logic the tables can say: a value looked up by
        ``value.upper()`` among an enum's member names (``load_format``: ``LoadFormat[v.upper()]``)."""
        rules = {}
        for stmt in node.body:
            if not isinstance(stmt, ast.FunctionDef):
                continue
            fields = [_const(a) for d in stmt.decorator_list if isinstance(d, ast.Call)
                      and _call_name(d) == 'field_validator' for a in d.args]
            upper = any(isinstance(c, ast.Call) and _call_name(c) == 'upper' for c in ast.walk(stmt))
            enums = [c.value.id for c in ast.walk(stmt) if isinstance(c, ast.Attribute) and c.attr == '__members__'
                     and isinstance(c.value, ast.Name)]
            if not (fields and upper and len(set(enums)) == 1):
                continue
            kind, _mod, enum_node = self.lookup(module, enums[0])
            if kind != 'class':
                continue
            names = [t.id for s in enum_node.body if isinstance(s, ast.Assign) for t in s.targets
                     if isinstance(t, ast.Name) and not t.id.startswith('_')]
            for field in fields:
                if isinstance(field, str):
                    rules[field] = {'rule': 'enum_name_case_insensitive', 'enum': enums[0], 'names': names}
        return rules

    def _linear(self, module, node, seen=None):
        """[(module, node)] of the class then its model ancestors (depth first, left to right)."""
        seen = seen if seen is not None else set()
        out = [(module, node)]
        for base in node.bases:
            name = _call_name(base)
            if not name or name in seen or name in _MODEL_BASES[:1]:
                continue
            kind, bmod, bnode = self.lookup(module, name)
            if kind == 'class' and self.class_kind(bmod, bnode) is not None:
                seen.add(name)
                out.extend(self._linear(bmod, bnode, seen))
        return out

    def dispatch_of(self, module, node):
        """A from_dict classmethod that maps a key's value to a class (decoding_type, algorithm)."""
        for stmt in node.body:
            if not (isinstance(stmt, ast.FunctionDef) and stmt.name == 'from_dict'):
                continue
            mapping, key, lowered, overrides, var = None, None, False, {}, None
            for sub in ast.walk(stmt):
                if isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Call) and isinstance(
                        sub.value.func, ast.Attribute) and sub.value.func.attr == 'get' and isinstance(
                        sub.targets[0], ast.Name) and var is None:
                    var = sub.targets[0].id
            for sub in ast.walk(stmt):
                if isinstance(sub, ast.Dict) and sub.keys and all(
                        isinstance(k, ast.Constant) and isinstance(k.value, str) for k in sub.keys) and all(
                        isinstance(v, ast.Name) for v in sub.values):
                    mapping = dict((k.value, v.id) for k, v in zip(sub.keys, sub.values))
                if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == 'get' \
                        and sub.args and isinstance(sub.args[0], ast.Constant) and key is None:
                    key = sub.args[0].value
                if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == 'lower' \
                        and isinstance(sub.func.value, ast.Name) and sub.func.value.id == var:
                    lowered = True
                if isinstance(sub, ast.If):
                    value, backends = self._backend_override(sub.test)
                    target = [c.func.id for c in ast.walk(ast.Module(body=sub.body, type_ignores=[]))
                              if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                              and c.func.id[:1].isupper()]
                    if value and target:
                        for backend in backends or ['*']:
                            overrides.setdefault(value, {})[backend] = target[0]
            if mapping and key:
                for cls in mapping.values():
                    self._named(module, cls)
                out = {'key': key, 'classes': mapping}
                if lowered:
                    out['case_insensitive'] = True
                if overrides:
                    out['backend_overrides'] = overrides
                return out
        return None

    @staticmethod
    def _backend_override(test):
        value, backends = None, []
        for sub in ast.walk(test):
            if isinstance(sub, ast.Compare) and isinstance(sub.left, ast.Name):
                if sub.left.id.endswith('type') and isinstance(sub.ops[0], ast.Eq):
                    value = _const(sub.comparators[0])
                if sub.left.id == 'backend' and isinstance(sub.ops[0], ast.In):
                    found = _const(sub.comparators[0])
                    if isinstance(found, (tuple, list)):
                        backends = list(found)
        return (value if isinstance(value, str) else None), backends

    @staticmethod
    def backend_rule(node):
        for stmt in node.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == 'supports_backend':
                for sub in stmt.body:
                    if isinstance(sub, ast.Return) and isinstance(sub.value, ast.BoolOp):
                        # backend == "a" or backend == "b"; backend != "a" and backend != "b"
                        ops = [c for c in sub.value.values if isinstance(c, ast.Compare)]
                        values = [_const(c.comparators[0]) for c in ops]
                        if len(ops) != len(sub.value.values) or not all(isinstance(v, str) for v in values):
                            continue
                        if isinstance(sub.value.op, ast.Or) and all(isinstance(c.ops[0], ast.Eq) for c in ops):
                            return {'supported': values}
                        if isinstance(sub.value.op, ast.And) and all(isinstance(c.ops[0], ast.NotEq) for c in ops):
                            return {'unsupported': values}
                    if isinstance(sub, ast.Return) and isinstance(sub.value, ast.Compare):
                        op, right = sub.value.ops[0], _const(sub.value.comparators[0])
                        if isinstance(right, str):
                            right = [right]
                        if isinstance(right, (list, tuple)):
                            if isinstance(op, (ast.NotIn, ast.NotEq)):
                                return {'unsupported': list(right)}
                            if isinstance(op, (ast.In, ast.Eq)):
                                return {'supported': list(right)}
        return None

    def dict_keys(self, module, node):
        """The string keys of a dict literal that ``node.keys()`` reads (a module or class attribute)."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == 'keys':
            node = node.func.value
        else:
            return None
        target = None
        if isinstance(node, ast.Name):
            kind, _mod, found = self.lookup(module, node.id)
            target = found if kind == 'alias' else None
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            kind, _mod, cls = self.lookup(module, node.value.id)
            if kind == 'class':
                for stmt in cls.body:
                    names = [t.id for t in getattr(stmt, 'targets', [getattr(stmt, 'target', None)])
                             if isinstance(t, ast.Name)]
                    if node.attr in names and isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                        target = stmt.value
        if isinstance(target, ast.Dict) and all(isinstance(_const(k), str) for k in target.keys):
            return [_const(k) for k in target.keys]
        return None

    def run(self, module_name, root):
        self.queue.append((module_name, root))
        while self.queue:
            mod, name = self.queue.pop(0)
            if name not in self.classes:
                self.collect(mod, name)
        self.classes = dict(sorted(self.classes.items()))

    def discriminated(self, key, classes):
        """The dispatch of a discriminated union: each class's literal value of ``key`` picks it; the base is the
        nearest model base every class shares."""
        mapping = {}
        for cls in classes:
            field = self.classes.get(cls, {}).get('fields', {}).get(key)
            if not field or field['type']['kind'] != 'literal':
                raise SystemExit('%s: a class of the union discriminated by %s has no literal %s' % (cls, key, key))
            for value in field['type']['values']:
                mapping[value] = cls
        shared = [b for b in self.classes[classes[0]]['bases']
                  if all(b in self.classes[c]['bases'] for c in classes)]
        return {'key': key, 'classes': dict(sorted(mapping.items())), 'discriminated': True,
                'base': shared[0] if shared else None}

    def field_dispatch(self):
        """{'<class>.<field>': dispatch} for fields whose value is picked by a from_dict key, or by the
        discriminator of a discriminated union (``Annotated[Union[...], Field(discriminator=...)]``)."""
        out = {}
        for cname, entry in self.classes.items():
            for fname, field in entry['fields'].items():
                ty = field['type']
                opts = ty['options'] if ty['kind'] == 'union' else [ty]
                classes = [o['name'] for o in opts if o['kind'] == 'class']
                if not classes:
                    continue
                if ty.get('discriminator'):
                    out['%s.%s' % (cname, fname)] = self.discriminated(ty['discriminator'], classes)
                    rule = self.tag_rules.get('%s.%s' % (cname, fname))
                    if rule and rule['key'] == ty['discriminator']:
                        out['%s.%s' % (cname, fname)]['inferred'] = dict(
                            (k, v) for k, v in rule.items() if k != 'key')
                    continue
                for base, dispatch in self.dispatchers.items():
                    if all(base in self.classes[c]['bases'] or c == base for c in classes):
                        out['%s.%s' % (cname, fname)] = dispatch
        return dict(sorted(out.items()))


# ----------------------------------------------------------------------------------- CLIs

def click_options(tree, command, resolve=None):
    """Options of a click command: {'--name': {aliases, type, choices, flag, default, multiple}}.

    ``resolve(node)`` turns a choices expression such as ``Factory.parsers.keys()`` into a list."""
    out = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        is_cmd = any(isinstance(d, ast.Call) and _call_name(d) == 'command' and d.args and
                     _const(d.args[0]) == command for d in node.decorator_list)
        if not is_cmd:
            continue
        for deco in node.decorator_list:
            if not (isinstance(deco, ast.Call) and _call_name(deco) == 'option'):
                continue
            names = [_const(a) for a in deco.args if isinstance(_const(a), str)]
            opts = [n for n in names if n.startswith('-')]
            if not opts:
                continue
            kws = dict((kw.arg, kw.value) for kw in deco.keywords if kw.arg)
            entry = {}
            longs = opts
            if len(opts) > 1:
                entry['aliases'] = opts[1:]
            if 'type' in kws:
                tnode = kws['type']
                if isinstance(tnode, ast.Call) and 'Choice' in (_call_name(tnode) or '') and tnode.args:
                    choices = _const(tnode.args[0])
                    if not isinstance(choices, (list, tuple)) and resolve is not None:
                        choices = resolve(tnode.args[0])
                    if isinstance(choices, (list, tuple)):
                        entry['choices'] = list(choices)
                    else:
                        entry['choices_from'] = ast.unparse(tnode.args[0])
                    entry['type'] = 'choice'
                else:
                    entry['type'] = _call_name(tnode) or ast.unparse(tnode)
            if _const(kws.get('is_flag')) is True:
                entry['flag'] = True
            if _const(kws.get('multiple')) is True:
                entry['multiple'] = True
            if 'default' in kws and isinstance(_const(kws['default']), (str, int, float, bool)):
                entry['default'] = _const(kws['default'])
            out[longs[0]] = entry
    return dict(sorted(out.items()))


def pytorch_drops(tree):
    """The keys ``launch_server`` pops from the LLM arguments on the pytorch backend
    (``if backend == 'pytorch': llm_args.pop("build_config", None)``): trtllm-serve drops them."""
    out = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.FunctionDef) and node.name == 'launch_server'):
            continue
        for branch in ast.walk(node):
            constants = [_const(c) for c in ast.walk(branch.test) if isinstance(c, ast.Constant)] \
                if isinstance(branch, ast.If) else []
            if 'pytorch' in constants:
                for call in ast.walk(ast.Module(body=branch.body, type_ignores=[])):
                    if isinstance(call, ast.Call) and _call_name(call) == 'pop' and call.args \
                            and isinstance(_const(call.args[0]), str):
                        out.add(_const(call.args[0]))
    return sorted(out)


def argparse_options(tree):
    """Every option string given to an add_argument call (vLLM EngineArgs.add_cli_args)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _call_name(node) == 'add_argument':
            for a in node.args:
                v = _const(a)
                if isinstance(v, str) and v.startswith('-'):
                    out.add(v)
    return sorted(out)


# ----------------------------------------------------------------------------------- engines

def trtllm_table(args):
    if args.html:
        source = Source(html_page=args.html, html_module='tensorrt_llm.llmapi.llm_args')
    else:
        source = Source(root=args.root, prefix=args.prefix)
    ex = Extractor(source)
    if ex.module('tensorrt_llm.llmapi.llm_args') is None:
        raise SystemExit('no tensorrt_llm/llmapi/llm_args.py under the source')
    ex.run('tensorrt_llm.llmapi.llm_args', 'TorchLlmArgs')
    table = {
        'engine': 'trtllm',
        'version': args.version,
        'root': 'TorchLlmArgs',
        'yaml_option': '--extra_llm_api_options',
        'classes': dict(sorted(ex.classes.items())),
        'enums': dict(sorted(ex.enums.items())),
        'dispatch': ex.field_dispatch(),
    }
    serve_mod = 'tensorrt_llm.commands.serve'
    serve_text = source.text(serve_mod)
    if serve_text is not None:
        ex.files[serve_mod] = (source.path_of(serve_mod), hashlib.sha256(serve_text.encode('utf-8')).hexdigest())
        serve = ex.module(serve_mod)
        serve_tree = ast.parse(serve_text)
        table['cli'] = {'command': 'trtllm-serve serve',
                        'options': click_options(serve_tree, 'serve',
                                                 resolve=lambda node: ex.dict_keys(serve, node))}
        table['serve_drops_for_pytorch'] = pytorch_drops(serve_tree)
    if getattr(args, 'serve_cli', None):
        # the serve options read off the release's trtllm-serve page (its commands/serve.py is not published)
        with open(args.serve_cli, encoding='utf-8') as handle:
            table['cli'] = serve_cli_from_page(json.load(handle), None)
        with open(args.serve_cli, 'rb') as handle:
            ex.files['serve_cli'] = (os.path.basename(args.serve_cli), hashlib.sha256(handle.read()).hexdigest())
    version_text = source.text('tensorrt_llm.version')
    if version_text is not None:
        m = re.search(r'__version__\s*=\s*[\'"]([^\'"]+)', version_text)
        table['source_version'] = m.group(1) if m else None
    if getattr(args, 'source_kind', None):
        table['source_kind'] = args.source_kind
        table.setdefault('source_version', args.version)
    return table, ex


def vllm_table(args):
    source = Source(root=args.root, wheel=args.wheel)
    ex = Extractor(source)
    # engine objects vLLM builds itself and hands to SpeculativeConfig (target/draft model and parallel
    # configs); they are not user keys, so their classes are not tabled
    ex.internal_classes = ('ModelConfig', 'ParallelConfig')
    spec_mod = None
    for name in ('vllm.config.speculative', 'vllm.config', 'vllm.config.__init__'):
        mod = ex.module(name)
        if mod is not None and 'SpeculativeConfig' in mod.classes:
            spec_mod = name
            break
    if spec_mod is None:
        raise SystemExit('no SpeculativeConfig class in vllm/config/speculative.py or vllm/config')
    ex.run(spec_mod, 'SpeculativeConfig')
    spec = ex.classes['SpeculativeConfig']
    method = spec['fields'].get('method', {}).get('type', {})
    methods = []
    for opt in (method.get('options') if method.get('kind') == 'union' else [method]):
        if opt.get('kind') == 'literal':
            methods.extend(opt['values'])
    table = {
        'engine': 'vllm',
        'version': args.version,
        'root': 'SpeculativeConfig',
        'json_option': '--speculative-config',
        'speculative_methods': methods,
        'classes': dict(sorted(ex.classes.items())),
        'enums': dict(sorted(ex.enums.items())),
    }
    arg_mod = 'vllm.engine.arg_utils'
    arg_text = source.text(arg_mod)
    if arg_text is not None:
        ex.files[arg_mod] = (source.path_of(arg_mod), hashlib.sha256(arg_text.encode('utf-8')).hexdigest())
        tree = ast.parse(arg_text)
        table['cli'] = {'command': 'vllm serve (EngineArgs options only)', 'options': argparse_options(tree)}
        table['set_by_engine'] = engine_set_keys(tree)
    for name in ('vllm.version', 'vllm._version'):
        text = source.text(name)
        if text:
            m = re.search(r'version\s*=\s*[\'"]([^\'"]+)', text)
            if m:
                table['source_version'] = m.group(1)
                break
    return table, ex


def engine_set_keys(tree):
    """Keys create_speculative_config writes itself into the --speculative-config mapping."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == 'create_speculative_config':
            keys = set()
            for sub in ast.walk(node):
                if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == 'update' \
                        and sub.args and isinstance(sub.args[0], ast.Dict):
                    keys.update(_const(k) for k in sub.args[0].keys if isinstance(_const(k), str))
            return sorted(keys)
    return []


# ----------------------------------------------------------------------------------- release facts

class FactsExtractor(Extractor):
    """Types of the annotations written in a facts file, resolved against the classes the file lists.

    The names an annotation uses are resolved in this order: a class the facts list (a nested config
    class); an enum, whose values are the facts' literals of the fields typed with it; a type alias of
    a dispatched union (``SpeculativeConfig``: the classes of its ``from_dict`` table); a class that
    the facts name as not checked (another module's model: opaque); a typing name; else unresolved."""

    def __init__(self, facts):
        super().__init__(Source())
        self.facts = facts
        self.known = facts['class_details']
        self.enum_values = {}
        self.alias_unions = {}
        self.external = set(facts.get('external_models_not_checked', []))
        self.by_name = set()

    def _named(self, module, name, depth=0):
        if name == 'None':
            return {'kind': 'none'}
        if name in self.known:
            return {'kind': 'class', 'name': name}
        if name in self.enum_values:
            self.enums.setdefault(name, list(self.enum_values[name]))
            return {'kind': 'enum', 'name': name}
        if name in self.alias_unions:
            return self._union([{'kind': 'class', 'name': c} for c in self.alias_unions[name]] + [{'kind': 'none'}])
        if name in self.external:
            return {'kind': 'opaque', 'name': name, 'not_checked': True}
        if name in self.by_name:  # an enum given by member name: the field's value_rule checks it
            return {'kind': 'opaque', 'name': name, 'by_name': True}
        if name in _SIMPLE:
            return _simple(_SIMPLE[name])
        self.unresolved.add(name)
        return {'kind': 'opaque', 'name': name}

    def annotation(self, text):
        return self.type_of(None, ast.parse(text, mode='eval').body)

    @staticmethod
    def names_in(text):
        return [n.id for n in ast.walk(ast.parse(text, mode='eval')) if isinstance(n, ast.Name)]

    def prepare(self):
        """Enums and dispatched aliases, from the literals and dispatch tables of the facts."""
        facts = self.facts
        root = facts['root_class']
        for dotted, values in facts.get('literals', {}).items():
            cls, field = dotted.split('.', 1) if '.' in dotted else (root, dotted)
            detail = self.known.get(cls, {}).get('fields', {}).get(field)
            if detail is None:
                raise SystemExit('facts: literal %s names no field' % dotted)
            mode = facts.get('literal_modes', {}).get(dotted, 'strict')
            enum = facts.get('literal_enums', {}).get(dotted)
            if mode == 'enum_name_case_insensitive':
                self.by_name.add(enum)
                continue  # member names, checked by the field's value rule, not enum values
            for name in self.names_in(detail['annotation']):
                if name not in self.known and name not in _SIMPLE and name not in ('Optional', 'Union', 'Literal') \
                        and (enum is None or name == enum):
                    self.enum_values[name] = [v for v in values if v is not None]
        root_fields = self.known[root]['fields']
        targets = [(field, list(rule['table'].values())) for field, rule in facts.get('dispatch', {}).items()]
        targets += [(field, [cls]) for field, cls in facts.get('nested', {}).items()
                    if field not in facts.get('dispatch', {})]
        for field, classes in targets:
            detail = root_fields.get(field)
            if detail is None:
                raise SystemExit('facts: %s names no field of %s' % (field, root))
            for name in self.names_in(detail['annotation']):
                if name not in self.known and name not in _SIMPLE and name not in ('Optional', 'Union') \
                        and name not in self.external:
                    self.alias_unions[name] = classes

    def chain(self, cls):
        out = []
        for base in self.known[cls].get('bases', []):
            if base not in out:
                out.append(base)
            if base in self.known:
                out.extend(b for b in self.chain(base) if b not in out)
        return out

    def build(self):
        self.prepare()
        facts = self.facts
        root = facts['root_class']
        modes = facts.get('literal_modes', {})
        for cls, detail in sorted(self.known.items()):
            fields = {}
            for name, field in sorted(detail['fields'].items()):
                entry = {'type': self.annotation(field['annotation']), 'required': bool(field.get('required'))}
                accepted = list(field.get('accepted_names') or [name])
                aliases = sorted(set(accepted) - {name})
                if aliases:
                    entry['aliases'] = aliases
                if accepted != [name] and name not in accepted:
                    # pydantic without populate_by_name accepts an aliased field only under its aliases
                    entry['accepted_names'] = sorted(accepted)
                if field.get('status'):
                    entry['status'] = field['status']
                dotted = name if cls == root else '%s.%s' % (cls, name)
                if modes.get(dotted) == 'enum_name_case_insensitive':
                    entry['value_rule'] = {
                        'rule': 'enum_name_case_insensitive', 'enum': facts['literal_enums'][dotted],
                        'names': [v for v in facts['literals'][dotted] if v is not None]}
                elif modes.get(dotted) == 'soft':
                    entry['literal_mode'] = 'soft'
                fields[name] = entry
            self.classes[cls] = {
                'module': 'tensorrt_llm.llmapi.llm_args', 'kind': 'pydantic',
                'extra': 'forbid' if facts['forbid_extra'].get(cls) else 'ignore',
                'bases': self.chain(cls), 'fields': fields,
            }
        tag = dict((cls, dtype) for dtype, cls in facts.get('decoding_types', {}).items())
        for cls, dtype in tag.items():
            if cls in self.classes:
                self.classes[cls]['classvars'] = {'decoding_type': dtype}
        dispatch = {}
        for field, rule in sorted(facts.get('dispatch', {}).items()):
            dispatch['%s.%s' % (root, field)] = {'base': rule['base'], 'key': rule['key'],
                                                 'classes': dict(sorted(rule['table'].items()))}
        return dispatch


def serve_cli_from_page(cli, names):
    """The table's ``cli`` from the options read off a release's trtllm-serve page, checked against the
    option names of the facts file (the two must agree)."""
    options = {}
    seen = set()
    for opt in cli['options']:
        first, rest = opt['names'][0], opt['names'][1:]
        entry = {}
        if rest:
            entry['aliases'] = list(rest)
        if opt.get('takes_value'):
            entry['type'] = 'choice' if opt.get('choices') else 'str'
        else:
            entry['flag'] = True
        if opt.get('choices'):
            entry['choices'] = list(opt['choices'])
        if opt.get('default') is not None:
            entry['default'] = opt['default']
        options[first] = entry
        seen.update(opt['names'])
    # click adds --help to every command; the facts list it, the page does not, the tables leave it out
    names = None if names is None else set(names) - {'--help'}
    if names is not None and names != seen:
        raise SystemExit('the CLI page and the facts disagree on the serve options: only on the page: %s; only in '
                         'the facts: %s' % (sorted(seen - set(names)), sorted(set(names) - seen)))
    return {'command': 'trtllm-serve serve', 'options': dict(sorted(options.items())),
            'source': {'page': cli['page'], 'commit': cli['commit']}}


def trtllm_facts_table(args):
    with open(args.facts, encoding='utf-8') as handle:
        facts = json.load(handle)
    if facts.get('root_class') != 'TorchLlmArgs':
        raise SystemExit('facts: root_class must be TorchLlmArgs')
    ex = FactsExtractor(facts)
    dispatch = ex.build()
    version = args.version or facts['version']
    table = {
        'engine': 'trtllm',
        'version': version,
        'source_version': facts['version'],
        'source_kind': facts['source_kind'],
        'root': facts['root_class'],
        'yaml_option': '--extra_llm_api_options',
        'classes': dict(sorted(ex.classes.items())),
        'enums': dict(sorted(ex.enums.items())),
        'dispatch': dispatch,
        'serve_drops_for_pytorch': sorted(facts.get('serve_drops_for_pytorch', [])),
        'not_checked_classes': sorted(ex.external),
    }
    if args.serve_cli:
        with open(args.serve_cli, encoding='utf-8') as handle:
            table['cli'] = serve_cli_from_page(json.load(handle), facts.get('serve_cli_options'))
    for key, path in (('facts', args.facts), ('serve_cli', args.serve_cli)):
        if path:
            with open(path, 'rb') as handle:
                ex.files[key] = (os.path.basename(path), hashlib.sha256(handle.read()).hexdigest())
    args.source = 'https://github.com/NVIDIA/TensorRT-LLM/blob/gh-pages/%s' % facts['source'].split(':', 1)[1]
    args.commit = facts['source_commit']
    args.html = None
    return table, ex


def index_names(names, table_fields):
    """The field names a search index documents for a class: its pydantic fields, and the attributes that are
    fields of the table (autodoc_pydantic lists a deprecated field as an attribute)."""
    return set(names.get('fields', [])) | (set(names.get('attributes', [])) & set(table_fields))


def trtllm_index_table(args):
    """A release whose rendered llm_args page is not published, from the table of a neighbouring release and the two
    releases' search indexes (the field names their API references document): the neighbour's table, less the fields
    the release's index lacks. The neighbour's table must agree with its own index, class by class; a field only the
    release documents cannot be typed from names, and is refused."""
    with open(os.path.join(args.out, 'index.json'), encoding='utf-8') as handle:
        entry = json.load(handle)['tables']['trtllm'][args.base]
    with open(os.path.join(args.out, entry['file']), encoding='utf-8') as handle:
        base = json.load(handle)
    docs = {}
    for key, path in (('names', args.names), ('base_names', args.base_names)):
        with open(path, encoding='utf-8') as handle:
            docs[key] = json.load(handle)
    if docs['base_names'].get('version') != args.base:
        raise SystemExit('--base-names is the index of %s, not of --base %s'
                         % (docs['base_names'].get('version'), args.base))
    classes = json.loads(json.dumps(base['classes']))
    disagree, added, removed = [], [], {}
    for cls, table_entry in sorted(classes.items()):
        mine, theirs = docs['base_names']['classes'].get(cls), docs['names']['classes'].get(cls)
        if mine is None or theirs is None:
            continue  # not in the API reference: kept as the neighbour has it
        fields = set(table_entry['fields'])
        documented = index_names(mine, fields)
        if documented != fields:
            disagree.append('%s: only in the table %s, only in its index %s'
                            % (cls, sorted(fields - documented), sorted(documented - fields)))
        target = index_names(theirs, fields)
        added += ['%s.%s' % (cls, name) for name in sorted(target - documented)]
        for name in sorted(documented - target):
            removed.setdefault(cls, []).append(name)
            table_entry['fields'].pop(name, None)
    if disagree:
        raise SystemExit('the %s table and its search index disagree: %s' % (args.base, '; '.join(disagree)))
    if added:
        raise SystemExit('%s documents fields the %s table lacks, which names alone cannot type: %s'
                         % (docs['names']['version'], args.base, ', '.join(added)))
    table = dict(base, version=args.version, source_version=docs['names']['version'], classes=classes,
                 source_kind='search-index-names-over-the-%s-table' % args.base,
                 derived={'from_table': args.base, 'removed_fields': removed})
    for key in ('schema', 'source', 'unresolved_names', 'also_releases'):
        table.pop(key, None)
    ex = Extractor(Source())
    ex.unresolved = set(base.get('unresolved_names', []))
    for key, path in (('names', args.names), ('base_names', args.base_names), ('base_table', entry['file'])):
        with open(path if key != 'base_table' else os.path.join(args.out, path), 'rb') as handle:
            ex.files[key] = (os.path.basename(path), hashlib.sha256(handle.read()).hexdigest())
    args.source = 'https://github.com/NVIDIA/TensorRT-LLM/blob/gh-pages/%s' % docs['names']['path']
    args.commit = docs['names']['commit']
    args.html = None
    args.source_note = ('the %s table (its own source) less the fields %s\'s search index does not document; the '
                        '%s table agrees with its own index class by class; classes the API reference does not '
                        'document are as in %s' % (args.base, args.version, args.base, args.base))
    return table, ex


# ----------------------------------------------------------------------------------- output

# what two releases' tables may differ in and still be one table (their provenance)
_PROVENANCE = ('version', 'source', 'source_version', 'also_releases', 'schema')


def facts_of(table):
    """A table without its provenance: what judges a config."""
    return dict((k, v) for k, v in table.items() if k not in _PROVENANCE)


def write_table(table, ex, args, share_with=None):
    """Write the table, or, when ``share_with`` (the file of the release just before) holds the same facts, list
    the release in that file's ``also_releases`` with its own provenance."""
    table['schema'] = SCHEMA_VERSION
    table['source'] = {
        'from': args.source,
        'commit': args.commit,
        'files': dict((mod, {'path': path, 'sha256': digest}) for mod, (path, digest) in sorted(ex.files.items())
                      if path),
        'generator': 'scripts/engine_tables.py',
    }
    if args.html:
        table['source']['note'] = 'rendered source page; classes from other modules are opaque'
    if getattr(args, 'source_note', None):
        table['source']['note'] = args.source_note
    if table.get('source_kind'):
        table['source']['kind'] = table.pop('source_kind')
        table['source']['version'] = table['source_version']
    table['unresolved_names'] = sorted(ex.unresolved)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, '%s-%s.json' % (table['engine'], table['version']))
    if share_with:
        with open(share_with, encoding='utf-8') as handle:
            earlier = json.load(handle)
        if facts_of(earlier) == facts_of(table):
            earlier.setdefault('also_releases', {})[table['version']] = dict(
                table['source'], version=table.get('source_version'))
            path, table = share_with, earlier
    with open(path, 'w', encoding='utf-8') as handle:
        json.dump(table, handle, indent=1, sort_keys=True)
        handle.write('\n')
    update_index(args.out)
    counts = dict((name, len(c['fields'])) for name, c in table['classes'].items())
    print('%s: %d classes, %d fields (%s: %d)%s'
          % (path, len(counts), sum(counts.values()), table['root'], counts[table['root']],
             '; also covers %s' % ', '.join(table['also_releases']) if table.get('also_releases') else ''))
    return path


def update_index(out, missing=None):
    path = os.path.join(out, 'index.json')
    index = {'tables': {}, 'not_sourced': {}}
    if os.path.exists(path):
        with open(path, encoding='utf-8') as handle:
            index.update(json.load(handle))
    index['tables'] = {}
    for name in sorted(os.listdir(out)):
        if not name.endswith('.json') or name == 'index.json':
            continue
        with open(os.path.join(out, name), encoding='utf-8') as handle:
            table = json.load(handle)
        releases = dict(table.get('also_releases') or {}, **{table['version']: table['source']})
        for version, source in releases.items():
            index['tables'].setdefault(table['engine'], {})[version] = {
                'file': name, 'from': source['from'], 'commit': source['commit'],
                'fields': sum(len(c['fields']) for c in table['classes'].values()),
                'classes': len(table['classes']),
            }
            index['not_sourced'].get(table['engine'], {}).pop(version, None)
    if missing:
        engine, version, reason = missing
        index['not_sourced'].setdefault(engine, {})[version] = reason
    with open(path, 'w', encoding='utf-8') as handle:
        json.dump(index, handle, indent=1, sort_keys=True)
        handle.write('\n')


def _release_key(text):
    return tuple(int(part) for part in text.split('.'))


def pypi_releases(index_url, low, below, opener=urllib.request.urlopen):
    """version -> (wheel file name, URL) for every final release of the index in [low, below), oldest first; the
    x86_64 manylinux wheel where there is one (every wheel of a release holds the same Python source)."""
    request = urllib.request.Request(index_url, headers={'Accept': 'application/vnd.pypi.simple.v1+json'})
    with opener(request, timeout=60) as response:
        files = json.load(response)['files']
    found = {}
    for row in files:
        m = re.match(r'^vllm-(\d+(?:\.\d+)+)-[^-]+-[^-]+-([^-]+)\.whl$', row['filename'])
        if not m or not _release_key(low) <= _release_key(m.group(1)) < _release_key(below):
            continue
        best = found.get(m.group(1))
        if best is None or ('x86_64' in m.group(2) and 'x86_64' not in best[0]):
            found[m.group(1)] = (row['filename'], row['url'])
    return dict(sorted(found.items(), key=lambda item: _release_key(item[0])))


def vllm_releases(args):
    """Table every vLLM release in the range from its wheel on PyPI, sharing files between consecutive releases
    with the same facts; the vLLM tables there before are replaced."""
    releases = pypi_releases(args.index, args.low, args.below, opener=args.opener)
    if not releases:
        raise SystemExit('no vLLM wheel in [%s, %s) at %s' % (args.low, args.below, args.index))
    for name in os.listdir(args.out):
        if name.startswith('vllm-') and name.endswith('.json'):
            os.remove(os.path.join(args.out, name))
    previous = None
    for version, (filename, url) in releases.items():
        remote = HttpRangeFile(url, opener=args.opener)
        one = argparse.Namespace(version=version, root=None, wheel=remote, html=None, out=args.out,
                                 source='https://pypi.org/project/vllm/%s/ (%s)' % (version, filename),
                                 commit='release %s' % version)
        table, ex = vllm_table(one)
        previous = write_table(table, ex, one, share_with=previous)
        print('  (%d range requests of %d KiB for a %d MiB wheel)'
              % (remote.requests, HttpRangeFile.BLOCK // 1024, remote.size // (1 << 20)))
    return 0


def main(argv=None, opener=urllib.request.urlopen):
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    sub = parser.add_subparsers(dest='engine', required=True)
    for engine in ('trtllm', 'vllm'):
        p = sub.add_parser(engine)
        p.add_argument('--version', required=True)
        p.add_argument('--root', help='source tree (directory holding the package)')
        p.add_argument('--prefix', default='', help='path of the package inside --root')
        p.add_argument('--source', required=True, help='where the source came from (URL or package file)')
        p.add_argument('--commit', help='commit or release of the source')
        p.add_argument('--out', default=OUT_DIR)
        if engine == 'trtllm':
            p.add_argument('--html', help='Sphinx viewcode page of tensorrt_llm/llmapi/llm_args.py')
            p.add_argument('--serve-cli', help="the serve subcommand's options read off the release's trtllm-serve "
                                               "page (when the source has no tensorrt_llm/commands/serve.py)")
            p.add_argument('--source-note', help='what a reader of the table must know about its source')
            p.add_argument('--source-kind', help='what the source is when it is not the release\'s own files '
                                                 '(condensed-transcription-of-rendered-html)')
        else:
            p.add_argument('--wheel', help='released wheel file')
    p = sub.add_parser('trtllm-facts')
    p.add_argument('--facts', required=True, help="a release's facts file (llm_args classes, literals, dispatch)")
    p.add_argument('--serve-cli', help="the serve subcommand's options read off the release's trtllm-serve page")
    p.add_argument('--version', help='the version to table the facts as (default: the version of the facts)')
    p.add_argument('--out', default=OUT_DIR)
    p = sub.add_parser('trtllm-index', help="a release without a published llm_args page: a neighbour's table less "
                                            "the fields the release's search index does not document")
    p.add_argument('--version', required=True)
    p.add_argument('--base', required=True, help='the tabled neighbouring release')
    p.add_argument('--names', required=True, help="the release's search-index names (class -> fields, attributes)")
    p.add_argument('--base-names', required=True, help="the neighbour's search-index names")
    p.add_argument('--out', default=OUT_DIR)
    p = sub.add_parser('vllm-releases', help='every vLLM release in the supported range, from PyPI')
    p.add_argument('--index', default='https://pypi.org/simple/vllm/')
    p.add_argument('--from', dest='low', default='0.9.0')
    p.add_argument('--below', default='1.0.0')
    p.add_argument('--out', default=OUT_DIR)
    p = sub.add_parser('missing')
    p.add_argument('which', choices=('trtllm', 'vllm'))
    p.add_argument('version')
    p.add_argument('--reason', required=True)
    p.add_argument('--out', default=OUT_DIR)
    args = parser.parse_args(argv)
    if args.engine == 'vllm-releases':
        args.opener = opener
        return vllm_releases(args)
    if args.engine == 'missing':
        update_index(args.out, (args.which, args.version, args.reason))
        return 0
    if args.engine == 'trtllm-facts':
        table, ex = trtllm_facts_table(args)
    elif args.engine == 'trtllm-index':
        table, ex = trtllm_index_table(args)
    elif args.engine == 'trtllm':
        table, ex = trtllm_table(args)
    else:
        args.html = None
        table, ex = vllm_table(args)
    write_table(table, ex, args)
    return 0


if __name__ == '__main__':
    sys.exit(main())
