from jinja2.runtime import LoopContext, Macro, Markup, Namespace, TemplateNotFound, TemplateReference, TemplateRuntimeError, Undefined, escape, identity, internalcode, markup_join, missing, str_join
name = 'plan.md.j2'

def root(context, missing=missing):
    resolve = context.resolve_or_missing
    undefined = environment.undefined
    concat = environment.concat
    cond_expr_undefined = Undefined
    if 0: yield None
    l_0_plan = resolve('plan')
    l_0_etp = missing
    try:
        t_1 = environment.filters['abs']
    except KeyError:
        @internalcode
        def t_1(*unused):
            raise TemplateRuntimeError("No filter named 'abs' found.")
    try:
        t_2 = environment.filters['thousands']
    except KeyError:
        @internalcode
        def t_2(*unused):
            raise TemplateRuntimeError("No filter named 'thousands' found.")
    try:
        t_3 = environment.tests['none']
    except KeyError:
        @internalcode
        def t_3(*unused):
            raise TemplateRuntimeError("No test named 'none' found.")
    pass
    l_0_etp = (environment.joined((' (expert tensor ', environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'expert_tensor'), ')', ), False) if ((environment.charged(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'expert')) > 1) and (environment.charged(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'expert_tensor')) != environment.charged(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'tensor')))) else '')
    context.vars['etp'] = l_0_etp
    context.exported_vars.add('etp')
    yield '\n# Pipeline plan: '
    yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'name')))
    yield '\n'
    if environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'description'):
        pass
        yield '\n'
        yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'description')))
        yield '\n'
    if (environment.charged(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'status')) == 'refused'):
        pass
        yield '\n**Pipeline planning refused** by '
        yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'refusal'), 'id')))
        yield ': '
        yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'refusal'), 'message')))
        yield '\n\n**Recommended instead:** data parallelism plus tensor parallelism:\ntensor = '
        yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'tensor')))
        if (environment.charged(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'expert')) > 1):
            pass
            yield ', expert = '
            yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'expert')))
            yield str(environment.finalize((undefined(name='etp') if l_0_etp is missing else l_0_etp)))
        yield ', data parallel = '
        yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'data_parallel')))
        yield ' on '
        yield str(environment.finalize(t_2(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'gpus'))))
        yield ' '
        yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'accelerator')))
        yield '\n('
        yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'memory'), 'total_gb')))
        yield ' GiB per GPU of '
        yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'memory'), 'limit_gb')))
        yield ' GiB usable; micro-batch size '
        yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'micro_batch_size')))
        yield ',\n'
        yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'microbatches')))
        yield ' gradient-accumulation steps per optimizer step).\nNo bubble or GPU-hour comparison applies: there is no pipeline.'
    elif (environment.charged(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'status')) == 'no-pipeline'):
        pass
        yield '\n**Recommendation: no pipeline parallelism.** '
        if (environment.charged(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'unpipelined')) == 'sharded'):
            pass
            yield 'ZeRO-'
            yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'zero_stage')))
            yield ' shards the training state over the data-parallel ranks\n('
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'memory'), 'total_gb')))
            yield ' GiB per GPU of '
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'memory'), 'limit_gb')))
            yield ' GiB usable), and no pipelined layout is faster (the notes say why).'
        elif (environment.charged(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'unpipelined')) == 'parallel'):
            pass
            yield 'The training state fits without a pipeline\n('
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'memory'), 'total_gb')))
            yield ' GiB per GPU of '
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'memory'), 'limit_gb')))
            yield ' GiB usable), and no pipelined layout is faster (the notes say why).'
        else:
            pass
            yield 'The whole training state fits one '
            yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'accelerator')))
            yield '\n('
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'memory'), 'total_gb')))
            yield ' GiB of '
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'memory'), 'limit_gb')))
            yield ' GiB usable), so pipeline stages would only add bubble.'
        yield '\nTrain with '
        if (environment.charged(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'tensor')) > 1):
            pass
            yield 'tensor parallel '
            yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'tensor')))
            yield ', '
        if (environment.charged(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'context')) > 1):
            pass
            yield 'context parallel '
            yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'context')))
            yield ', '
        if (environment.charged(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'expert')) > 1):
            pass
            yield 'experts over '
            yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'expert')))
            yield ' ranks'
            yield str(environment.finalize((undefined(name='etp') if l_0_etp is missing else l_0_etp)))
            yield ', '
        yield 'data parallel '
        yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'data_parallel')))
        yield ' (micro-batch size '
        yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'micro_batch_size')))
        yield ',\n'
        yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'microbatches')))
        yield ' gradient-accumulation '
        yield str(environment.finalize(('step' if (environment.charged(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'microbatches')) == 1) else 'steps')))
        yield ' per optimizer step).'
        if environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'performance'):
            pass
            yield '\nStep time (model): '
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'performance'), 'step_time')))
            yield ', '
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'performance'), 'tokens_per_s')))
            yield ' tokens/s per GPU (band '
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'performance'), 'band')))
            yield '), MFU '
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'performance'), 'mfu')))
            yield '.'
    elif (environment.charged(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'status')) == 'infeasible'):
        pass
        yield '\n**No feasible pipeline plan.**\n'
        for l_1_note in environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'notes'):
            environment.count_step('a loop iteration')
            _loop_vars = {}
            pass
            yield '\n- '
            yield str(environment.finalize(l_1_note))
        l_1_note = missing
        yield '\n\nWhat would make it feasible: more memory per stage (full activation recompute, a larger tensor-parallel\nsize, or accelerators with more memory), or a larger global batch when the schedule needs more micro-batches.'
    else:
        pass
        yield '\n**Recommendation: '
        yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'schedule_title')))
        yield '** with P = '
        yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'pipeline')))
        yield ' pipeline ranks and M = '
        yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'microbatches')))
        yield '\nmicro-batches (micro-batch size '
        yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'micro_batch_size')))
        yield '; tensor '
        yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'tensor')))
        yield ', expert '
        yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'expert')))
        yield ','
        if ((environment.charged(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'expert')) > 1) and (environment.charged(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'expert_tensor')) != environment.charged(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'tensor')))):
            pass
            yield ' expert tensor '
            yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'expert_tensor')))
            yield ','
        if (environment.charged(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'context')) > 1):
            pass
            yield ' context '
            yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'context')))
            yield ','
        yield '\ndata parallel '
        yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'data_parallel')))
        yield ') on '
        yield str(environment.finalize(t_2(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'gpus'))))
        yield ' '
        yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'accelerator')))
        yield '.\n\n| | |\n|---|---|'
        if t_3(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'chosen'), 'bubble')):
            pass
            yield '\n| Expected bubble | not simulated: '
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'chosen'), 'violations')))
            yield ' |\n| GPU-hours for '
            yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'tokens')))
            yield ' tokens | '
            yield str(environment.finalize(t_2(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'ideal_gpu_hours'))))
            yield ' with no bubble |'
        else:
            pass
            yield '\n| Expected bubble | **'
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'chosen'), 'bubble_pct')))
            yield '** ('
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'chosen'), 'method')))
            yield ')'
            if environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'baseline'):
                pass
                yield '; 1F1B at the same P and M: '
                yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'baseline'), 'bubble_pct')))
            yield ' |\n| GPU-hours for '
            yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'tokens')))
            yield ' tokens | '
            yield str(environment.finalize(t_2(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'chosen'), 'gpu_hours'))))
            if environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'saved'):
                pass
                yield ' ('
                yield str(environment.finalize(t_2(t_1(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'saved'), 'hours')))))
                yield ' '
                yield str(environment.finalize(('saved' if (environment.charged(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'saved'), 'hours')) >= 0) else 'more')))
                yield ' vs '
                yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'saved'), 'against')))
                yield ')'
            elif (environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'baseline') and (not t_3(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'baseline'), 'gpu_hours')))):
                pass
                yield ' ('
                yield str(environment.finalize(t_2(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'saved_vs_1f1b'))))
                yield ' '
                yield str(environment.finalize(('saved' if (environment.charged(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'saved_vs_1f1b')) >= 0) else 'more')))
                yield ' vs 1F1B at the same P and M)'
            yield ' |'
        if environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'performance'):
            pass
            yield '\n| Step time (model) | '
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'performance'), 'step_time')))
            yield ': '
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'performance'), 'tokens_per_s')))
            yield ' tokens/s per GPU (band '
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'performance'), 'band')))
            yield '), MFU '
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'performance'), 'mfu')))
            yield ' (`dpguard perf`, docs/performance.md) |'
        yield '\n| Memory per GPU (worst rank) | '
        yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'memory'), 'total_gb')))
        yield ' GiB (band '
        yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'memory'), 'low_gb')))
        yield '-'
        yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'memory'), 'high_gb')))
        yield ') of '
        yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'memory'), 'limit_gb')))
        yield ' GiB usable ('
        yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'usable_gib')))
        yield ' GiB less '
        yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'headroom_pct')))
        yield ' headroom)'
        if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'memory'), 'worst'):
            pass
            yield '; rank '
            yield str(environment.finalize(environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'memory'), 'worst'), 'rank')))
            yield ': weights '
            yield str(environment.finalize(environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'memory'), 'worst'), 'weights_gib')))
            yield ' + gradients '
            yield str(environment.finalize(environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'memory'), 'worst'), 'gradients_gib')))
            yield ' + optimizer '
            yield str(environment.finalize(environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'memory'), 'worst'), 'optimizer_gib')))
            if environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'memory'), 'worst'), 'replica_gib'):
                pass
                yield ' + second copy '
                yield str(environment.finalize(environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'memory'), 'worst'), 'replica_gib')))
            yield ' + activations '
            yield str(environment.finalize(environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'memory'), 'worst'), 'activations_gib')))
            yield ' ('
            yield str(environment.finalize(environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'memory'), 'worst'), 'inflight_microbatches')))
            yield ' in flight) + other '
            yield str(environment.finalize(environment.getattr(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'memory'), 'worst'), 'other_gib')))
            yield ' GiB (`dpguard memory` for every rank)'
        yield ' |'
        if (environment.charged(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'schedule')) == 'dualpipe'):
            pass
            yield '\n| DualPipe replication | +'
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'memory'), 'replication_gb')))
            yield ' GiB per GPU for the second parameter copy; fits. '
            yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'params_per_gpu')))
            yield ' parameters per GPU across both copies ('
            yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'param_density')))
            yield ' of the model; experts sharded '
            yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'expert_shards')))
            yield '-way) |'
        yield '\n| All-to-all kernel | '
        if (environment.charged(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'kernel'), 'kernel')) == 'none'):
            pass
            yield 'none needed (no expert parallelism)'
        else:
            pass
            yield '**'
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'kernel'), 'kernel')))
            yield '**: '
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'kernel'), 'requires')))
        yield ' |\n| Micro-batches | M/P = '
        yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'm_over_p')))
        if environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'mbs_by_model'):
            pass
            yield '; micro-batch size chosen by the step-time model: at '
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'mbs_by_model'), 'size')))
            yield ', the size the M/P target '
            yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'mp_range')))
            yield ' picks, the step is priced '
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'mbs_by_model'), 'slower')))
            yield ' slower'
        elif environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'mbs_chosen'):
            pass
            yield '; micro-batch size chosen for M/P '
            if environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'm_over_p_in_range'):
                pass
                yield 'in'
            else:
                pass
                yield 'as close as the global batch allows to'
            yield ' '
            yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'mp_range')))
        else:
            pass
            yield '; M = global batch '
            yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'global_batch')))
            yield ' / (micro-batch '
            yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'micro_batch_size')))
            yield ' x DP '
            yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'data_parallel')))
            yield ')'
        yield '; activations at seq '
        yield str(environment.finalize(t_2(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'seq_len'))))
        yield ': '
        yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'memory'), 'activations_gb')))
        yield ' GiB per GPU |\n\nEvery schedule at P = '
        yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'pipeline')))
        yield ', M = '
        yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'microbatches')))
        yield " (bubble: the exact simulation at the policy's op-time ratios below; GPU-hours: the step-time model, with this layout's own forward, backward and weight-gradient times):\n\n| schedule | bubble | GPU-hours | vs 1F1B | policies |\n|---|---|---|---|---|"
        for l_1_c in environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'candidates'):
            environment.count_step('a loop iteration')
            _loop_vars = {}
            pass
            yield '\n| '
            yield str(environment.finalize(environment.getattr(l_1_c, 'schedule')))
            if (environment.charged(environment.getattr(l_1_c, 'schedule')) == environment.charged(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'schedule'))):
                pass
                yield ' (chosen)'
            yield ' | '
            if (not t_3(environment.getattr(l_1_c, 'bubble'))):
                pass
                yield str(environment.finalize(environment.getattr(l_1_c, 'bubble_pct')))
                yield ' | '
                yield str(environment.finalize(t_2(environment.getattr(l_1_c, 'gpu_hours'))))
                yield ' | '
                yield str(environment.finalize(environment.getattr(l_1_c, 'vs_1f1b')))
                yield ' | '
                yield str(environment.finalize(environment.getattr(l_1_c, 'policy')))
            else:
                pass
                yield 'n/a | n/a | '
                yield str(environment.finalize(environment.getattr(l_1_c, 'violations')))
                yield ' | cannot run'
            yield ' |'
        l_1_c = missing
        if environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'alternatives'):
            pass
            yield '\n\nFastest layout of each other schedule by the step-time model: '
            l_1_loop = missing
            for l_1_a, l_1_loop in LoopContext(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'alternatives'), undefined):
                environment.count_step('a loop iteration')
                _loop_vars = {}
                pass
                yield '**'
                yield str(environment.finalize(environment.getattr(l_1_a, 'schedule')))
                yield '** ('
                yield str(environment.finalize(environment.getattr(l_1_a, 'layout')))
                yield '): '
                yield str(environment.finalize(t_2(environment.getattr(l_1_a, 'gpu_hours'))))
                yield ' GPU-hours, MFU '
                yield str(environment.finalize(environment.getattr(l_1_a, 'mfu')))
                if (not environment.getattr(l_1_loop, 'last')):
                    pass
                    yield '; '
            l_1_loop = l_1_a = missing
            yield '.'
    yield '\n## How the policies judged it\n'
    if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'decision'), 'id'):
        pass
        yield '\n- Decision `'
        yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'decision'), 'id')))
        yield '`: '
        yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'decision'), 'title')))
    for l_1_r in environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'redirects'):
        environment.count_step('a loop iteration')
        _loop_vars = {}
        pass
        yield '\n- Redirected by `'
        yield str(environment.finalize(environment.getattr(l_1_r, 'id')))
        yield '`: '
        yield str(environment.finalize(environment.getattr(l_1_r, 'title')))
    l_1_r = missing
    if (environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'proposal') and (environment.charged(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'status')) != 'refused')):
        pass
        yield '\n- Your proposal ('
        yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'proposal'), 'schedule')))
        yield ', P = '
        yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'proposal'), 'pipeline')))
        yield ', M = '
        yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'proposal'), 'microbatches')))
        yield '): '
        if environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'proposal'), 'cannot_run'):
            pass
            yield 'cannot run as '
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'proposal'), 'judged_as')))
            yield ': '
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'proposal'), 'cannot_run')))
        else:
            pass
            yield 'bubble '
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'proposal'), 'bubble_pct')))
            yield ', '
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'proposal'), 'gpu_hours')))
            yield ' GPU-hours, '
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'proposal'), 'memory_gb')))
            yield ' GiB per GPU'
            yield str(environment.finalize(environment.getattr(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'proposal'), 'memory_over')))
    for l_1_f in environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'findings'):
        environment.count_step('a loop iteration')
        _loop_vars = {}
        pass
        yield '\n- As written: `'
        yield str(environment.finalize(environment.getattr(l_1_f, 'code')))
        yield '` ('
        yield str(environment.finalize(environment.getattr(l_1_f, 'severity')))
        yield ') '
        yield str(environment.finalize(environment.getattr(l_1_f, 'message')))
    l_1_f = missing
    for l_1_f in environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'plan_findings'):
        environment.count_step('a loop iteration')
        _loop_vars = {}
        pass
        yield '\n- This plan: `'
        yield str(environment.finalize(environment.getattr(l_1_f, 'code')))
        yield '` ('
        yield str(environment.finalize(environment.getattr(l_1_f, 'severity')))
        yield ') '
        yield str(environment.finalize(environment.getattr(l_1_f, 'message')))
    l_1_f = missing
    for l_1_k in environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'kept_warnings'):
        environment.count_step('a loop iteration')
        _loop_vars = {}
        pass
        yield '\n- This plan keeps `'
        yield str(environment.finalize(environment.getattr(l_1_k, 'code')))
        yield '` (warning) '
        yield str(environment.finalize(environment.getattr(l_1_k, 'message')))
        yield ': '
        yield str(environment.finalize(environment.getattr(l_1_k, 'reason')))
    l_1_k = missing
    if (environment.charged(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'status')) != 'infeasible'):
        pass
        for l_1_note in environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'notes'):
            environment.count_step('a loop iteration')
            _loop_vars = {}
            pass
            yield '\n- '
            yield str(environment.finalize(l_1_note))
        l_1_note = missing
    yield '\n\n## Assumptions\n'
    for l_1_a in environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'assumptions'):
        environment.count_step('a loop iteration')
        _loop_vars = {}
        pass
        yield '\n- '
        yield str(environment.finalize(l_1_a))
    l_1_a = missing
    yield '\n- Policies: '
    yield str(environment.finalize(environment.getattr((undefined(name='plan') if l_0_plan is missing else l_0_plan), 'policies')))
    yield '\n\n'
    template = environment.get_template('rollback.md.j2', 'plan.md.j2')
    gen = template.root_render_func(template.new_context(context.get_all(), True, {'etp': l_0_etp}))
    try:
        for event in gen:
            yield event
    finally: gen.close()
    yield '\n'

blocks = {}
debug_info = '2=31&3=35&4=37&5=40&7=42&8=45&11=49&12=62&13=68&15=70&16=73&17=78&18=85&19=94&20=99&21=121&22=125&23=128&25=136&27=139&28=144&34=150&35=156&36=173&40=179&41=182&42=184&44=191&45=200&47=220&48=223&50=232&51=266&52=269&54=278&55=288&57=323&61=327&62=332&64=353&66=357&70=375&71=378&73=381&74=386&76=390&77=393&79=415&80=420&82=426&83=431&85=437&86=442&88=448&89=455&93=458&94=463&96=466&98=468'