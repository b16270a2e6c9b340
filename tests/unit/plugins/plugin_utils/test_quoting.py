"""plugins/plugin_utils/_quoting.py: the one quoting rule, each context read back by its reader
(a POSIX shell sources an environment file, shlex splits a command line) where one runs here."""

import shlex
import subprocess

import pytest

from ansible_collections.specdec.serve.plugins.plugin_utils import _quoting as quoting

AWKWARD = ['plain', 'two words', 'a"quote', "it's", 'back\\slash', '$HOME', '`id`', '50%', '', ';', '--flag=x y', '$(id)']


@pytest.mark.parametrize('value', AWKWARD)
def test_env_values_read_back_by_a_shell_exactly(tmp_path, value):
    path = tmp_path / 'env'
    path.write_text(quoting.env_file([('X', value)], header='Managed'))
    out = subprocess.run(['/bin/sh', '-c', '. "$1"; printf %s "$X"', 'sh', str(path)], capture_output=True, check=True)
    assert out.stdout.decode() == value


@pytest.mark.parametrize('value', AWKWARD)
def test_command_words_split_back_to_one_word(value):
    assert shlex.split('prog %s tail' % quoting.quote(value, 'command')) == ['prog', value, 'tail']


@pytest.mark.parametrize('value,written', [
    ('/usr/local/lib/specdec/x.py', '/usr/local/lib/specdec/x.py'),
    ('/opt/my dir/x', '"/opt/my dir/x"'),
    ('a"b', '"a\\"b"'),
    ('$HOME', '"$$HOME"'),
    ('%h', '"%%h"'),
    ('back\\slash', '"back\\\\slash"'),
])
def test_unit_arguments_are_one_word_without_expansion(value, written):
    assert quoting.quote(value, 'unit') == written


@pytest.mark.parametrize('value', ['15d --web.enable-admin-api', 'x\ty', '"15d"', "'15d'", 'a\\b', '$X', '`id`', ''])
def test_split_words_refuse_what_would_become_another_argument(value):
    assert quoting.problem(value, 'split')
    with pytest.raises(quoting.QuotingError):
        quoting.split_words(['--ok', '--storage.tsdb.retention.time=%s' % value if value else value])


def test_split_words_join_safe_words():
    assert quoting.split_words(['--a=1', '--web.listen-address=[::1]:9090', '--cluster.listen-address=']) == \
        '--a=1 --web.listen-address=[::1]:9090 --cluster.listen-address='


@pytest.mark.parametrize('context', quoting.CONTEXTS)
@pytest.mark.parametrize('value', ['a\nb', 'a\x00b', 'a\rb', 'a\x7fb'])
def test_no_context_takes_a_control_character(context, value):
    assert 'control character' in quoting.problem(value, context)
    with pytest.raises(quoting.QuotingError):
        quoting.quote(value, context)


@pytest.mark.parametrize('value', [None, True, ['a'], {'a': 1}])
def test_only_strings_and_numbers(value):
    with pytest.raises(quoting.QuotingError):
        quoting.quote(value, 'env')


def test_numbers_are_written_as_text():
    assert quoting.quote(9090, 'env') == '"9090"'


def test_env_file_refuses_a_bad_name_and_an_unknown_context():
    with pytest.raises(quoting.QuotingError):
        quoting.env_file([('A B', 'x')])
    with pytest.raises(ValueError):
        quoting.problem('x', 'yaml')
