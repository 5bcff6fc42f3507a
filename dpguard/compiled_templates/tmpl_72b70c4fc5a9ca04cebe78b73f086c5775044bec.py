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
    if environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'unchanged'):
        pass
        yield '\n\nUnchanged: '
        yield str(environment.finalize(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'unchanged')))
        yield '.\n'
    yield '\n**'
    yield str(environment.finalize(environment.getattr((undefined(name='report') if l_0_report is missing else l_0_report), 'summary_line')))
    yield '**\n'
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
            yield '\n'
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
debug_info = '3=12&6=14&8=25&11=28&12=33&14=49&15=53&17=56&19=58&20=61&25=71&27=74&29=77&30=80&32=85&36=89&37=91&38=95&39=98&41=103&42=107&43=109&44=111&45=115&47=125&51=128&52=133&54=142&55=147&58=157&59=160&62=164&63=169&65=174&67=177'