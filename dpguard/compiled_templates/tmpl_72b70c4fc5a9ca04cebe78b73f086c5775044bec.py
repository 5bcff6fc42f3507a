from jinja2.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = 'diff.md.j2'

def root(context, missing=missing):
    resolve = context.resolve_or_missing
    undefined = environment.undefined
    concat = environment.concat
    cond_expr_undefined = Undefined
    if 0: yield None
    l_0_report = resolve('report')
    pass
    yield str(environment.finalize(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'marker')))
    yield '\n## dpguard: what this change costs\n\n'
    if environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'baseline'):
        pass
        yield 'Compared with `'
        yield str(environment.finalize(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'baseline')))
        yield '` ('
        yield str(environment.finalize(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'commit')))
        yield '); both versions judged by the same policies.'
    else:
        pass
        yield 'Both files judged by the same policies.'
    yield '\n\n'
    if environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'changes'):
        pass
        yield '\n| file | status | GPU-hours | change | bubble | memory per GPU | verdict |\n|---|---|---|---|---|---|---|'
        for l_1_c in environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'changes'):
            environment.count_step('a loop iteration')
            _loop_vars = {}
            pass
            yield '\n| `'
            yield str(environment.finalize(environment.getattr(l_1_c, 'path')))
            yield '` | '
            yield str(environment.finalize(environment.getattr(l_1_c, 'status')))
            yield ' | '
            yield str(environment.finalize(environment.getattr(l_1_c, 'gpu_hours')))
            yield ' | '
            yield str(environment.finalize(environment.getattr(l_1_c, 'gpu_hours_delta')))
            yield ' | '
            yield str(environment.finalize(environment.getattr(l_1_c, 'bubble')))
            yield ' | '
            yield str(environment.finalize(environment.getattr(l_1_c, 'memory')))
            yield ' | '
            yield str(environment.finalize(environment.getattr(l_1_c, 'verdict')))
            yield ' |'
        l_1_c = missing
        yield '\n| **total** | | **'
        yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'totals'), 'gpu_hours')))
        yield '** | **'
        yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'totals'), 'gpu_hours_delta')))
        yield '** | | | |'
        if environment.getattr(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'totals'), 'unsized'):
            pass
            yield '\n\n'
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'totals'), 'unsized')))
            yield ' changed files could not be sized and are left out of the total.'
        yield '\n'
        if environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'currency'):
            pass
            yield '\nCost ('
            yield str(environment.finalize(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'currency')))
            yield '): '
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'totals'), 'cost')))
            yield ' ('
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'totals'), 'cost_delta')))
            yield ').\n'
        yield '\n'
    else:
        pass
        yield '\nNo manifest changed.\n'
    yield '\n**'
    yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'summary'), 'files')))
    yield ' manifests checked now: '
    yield str(environment.finalize((environment.getattr(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'summary'), 'files') - environment.getattr(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'summary'), 'failed'))))
    yield ' passed, '
    yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'summary'), 'failed')))
    yield ' failed ('
    yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'summary'), 'errors')))
    yield ' errors, '
    yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'summary'), 'warnings')))
    yield ' warnings)**\n'
    l_1_loop = missing
    for l_1_c, l_1_loop in LoopContext(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'changes'), undefined):
        environment.count_step('a loop iteration')
        _loop_vars = {}
        pass
        yield '\n\n### `'
        yield str(environment.finalize(environment.getattr(l_1_c, 'path')))
        yield '`: '
        yield str(environment.finalize(environment.getattr(l_1_c, 'status')))
        yield '\n\n| | |\n|---|---|\n| layout | '
        yield str(environment.finalize(environment.getattr(l_1_c, 'layout')))
        yield ' |\n| GPU-hours | '
        yield str(environment.finalize(environment.getattr(l_1_c, 'gpu_hours')))
        yield ' ('
        yield str(environment.finalize(environment.getattr(l_1_c, 'gpu_hours_delta')))
        yield ') |'
        if environment.getattr(l_1_c, 'cost'):
            pass
            yield '\n| cost | '
            yield str(environment.finalize(environment.getattr(l_1_c, 'cost')))
            yield ' ('
            yield str(environment.finalize(environment.getattr(l_1_c, 'cost_delta')))
            yield ') |'
        yield '\n| bubble | '
        yield str(environment.finalize(environment.getattr(l_1_c, 'bubble')))
        yield ' ('
        yield str(environment.finalize(environment.getattr(l_1_c, 'bubble_delta')))
        yield ') |\n| memory per GPU (worst rank) | '
        yield str(environment.finalize(environment.getattr(l_1_c, 'memory')))
        yield ' |\n| verdict | '
        yield str(environment.finalize(environment.getattr(l_1_c, 'verdict')))
        yield ' |\n'
        if environment.getattr(l_1_c, 'changed'):
            pass
            yield '\nChanged: '
            l_2_loop = missing
            for l_2_k, l_2_loop in LoopContext(environment.getattr(l_1_c, 'changed'), undefined):
                environment.count_step('a loop iteration')
                _loop_vars = {}
                pass
                yield str(environment.finalize(l_2_k))
                if (not environment.getattr(l_2_loop, 'last')):
                    pass
                    yield '; '
            l_2_loop = l_2_k = missing
            yield '.\n'
        if (environment.getattr(l_1_c, 'added') or environment.getattr(l_1_c, 'resolved')):
            pass
            yield '\n\n| | severity | rule | where | message |\n|---|---|---|---|---|'
            for l_2_f in environment.getattr(l_1_c, 'added'):
                environment.count_step('a loop iteration')
                _loop_vars = {}
                pass
                yield '\n| new | '
                yield str(environment.finalize(environment.getattr(l_2_f, 'severity')))
                yield ' | '
                yield str(environment.finalize(environment.getattr(l_2_f, 'code')))
                yield ' | '
                yield str(environment.finalize(environment.getattr(l_2_f, 'where')))
                yield ' | '
                yield str(environment.finalize(environment.getattr(l_2_f, 'message')))
                yield ' |'
            l_2_f = missing
            for l_2_f in environment.getattr(l_1_c, 'resolved'):
                environment.count_step('a loop iteration')
                _loop_vars = {}
                pass
                yield '\n| resolved | '
                yield str(environment.finalize(environment.getattr(l_2_f, 'severity')))
                yield ' | '
                yield str(environment.finalize(environment.getattr(l_2_f, 'code')))
                yield ' | '
                yield str(environment.finalize(environment.getattr(l_2_f, 'where')))
                yield ' | '
                yield str(environment.finalize(environment.getattr(l_2_f, 'message')))
                yield ' |'
            l_2_f = missing
        yield '\n'
        if environment.getattr(l_1_c, 'unchanged'):
            pass
            yield '\n'
            yield str(environment.finalize(environment.getattr(l_1_c, 'unchanged')))
            yield ' findings unchanged.\n'
    l_1_loop = l_1_c = missing
    yield '\n'
    for l_1_u in environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'unreadable'):
        environment.count_step('a loop iteration')
        _loop_vars = {}
        pass
        yield '\n- `'
        yield str(environment.finalize(environment.getattr(l_1_u, 'path')))
        yield '` cannot be compared: '
        yield str(environment.finalize(environment.getattr(l_1_u, 'message')))
    l_1_u = missing
    yield '\n'
    if environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'policies'):
        pass
        yield '\n\n<sub>'
        yield str(environment.finalize(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'policies')))
        yield '</sub>\n'
    yield '\n'

blocks = {}
debug_info = '3=12&6=14&8=25&11=28&12=33&14=49&15=53&17=56&19=59&20=62&25=73&26=84&28=89&32=93&33=95&34=99&35=102&37=107&38=111&39=113&40=115&41=119&43=129&47=132&48=137&50=146&51=151&54=161&55=164&58=168&59=173&61=178&63=181'