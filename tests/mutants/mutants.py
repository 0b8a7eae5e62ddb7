# SPDX-License-Identifier: MIT
"""The planted bugs `make check-mutants` requires the test suite to catch.

Each mutant is a typical bug in the safety path: one or more exact text
replacements in one source file (each `old` must occur exactly once, so a
mutant that no longer applies fails loudly instead of passing), and the
tests that should catch it: pytest node ids under tests/integration, or
"unit" for `make unit`.  Every mutant must still build: a mutant that does
not compile proves nothing.
"""

MUTANTS = [
    # -- bugs the suite did not catch before --
    ("read-back after the write skipped", "daemon/patch.c",
     [("\t\tif (r == 0)\n\t\t\tr = ptrace_peek_word(tid, site_word_addr(s), &got);",
       "\t\tgot = want;")],
     ["test_ptrace_faults.py::test_read_back_that_differs_restores_the_word"]),
    ("undo of written words skipped when a later write fails", "daemon/patch.c",
     [("\t\tif (!wrote)\n\t\t\tcontinue;\n\t\tu = ptrace_poke_word",
       "\t\tif (wrote || !wrote)\n\t\t\tcontinue;\n\t\tu = ptrace_poke_word")],
     ["test_ptrace_faults.py::test_second_site_failing_leaves_both_original"]),
    ("the newest thread never stopped", "daemon/ptrace.c",
     [("\t\tif (task_find(w, tids[i]))\n\t\t\tcontinue;",
       "\t\tif (task_find(w, tids[i]) || (n > 1 && i == n - 1))\n\t\t\tcontinue;")],
     ["test_held.py::test_every_task_is_stopped_while_held"]),
    ("a signal caught while held not delivered afterwards", "daemon/ptrace.c",
     [("r = ptrace_call(PTRACE_DETACH, t->tid, 0, (uint64_t)t->resume_sig, NULL);",
       "r = ptrace_call(PTRACE_DETACH, t->tid, 0, 0, NULL);")],
     ["test_held.py::test_signals_racing_the_stop_are_not_lost"]),
    ("the stack scan skipped (a walk that completes taken as clear)", "daemon/stackcheck.c",
     [("\tr = scan_stack(sc, tid, arch_regs_sp(regs), &done, spans, nspans, hit);\n\tif (r == 1)",
       "\tr = 0;\n\tif (r == 1)")],
     ["test_sigframes.py"]),
    ("the uninterruptible-sleep pre-check skipped", "daemon/patch.c",
     [("\t\tr = check_world_interruptible(a);", "\t\tr = 0 && check_world_interruptible(a);")],
     ["test_prod_states.py::test_uninterruptible_thread_is_busy"]),
    ("a deadline that never expires", "daemon/timeutil.h",
     [("\tif (ns <= 0)\n\t\treturn false;", "\tif (ns <= 0)\n\t\tns = 1000000;")],
     ["test_prod_states.py::test_uninterruptible_thread_is_busy"]),
    ("processes sharing the memory not held", "daemon/patch.c",
     [("ptrace_stop_all(&w, a->pid, a->vs.sharers, a->vs.n,",
       "ptrace_stop_all(&w, a->pid, a->vs.sharers, 0,")],
     ["test_held.py::test_every_task_is_stopped_while_held"]),
    ("a thread still parked reported as traced by another process", "daemon/ptrace.c",
     [("\tif (st.tracer > 0 && st.tracer == getpid()) {", "\tif (st.tracer < 0) {")],
     ["test_prod_states.py::test_thread_slow_to_stop_is_never_called_a_foreign_tracer"]),
    ("root's reserved connection slots given to users", "daemon/conn.c",
     [("\tif (cred.uid != 0 && s->nconns >= SERVER_MAX_CONNS - SERVER_ROOT_RESERVE) {",
       "\tif (cred.uid != 0 && s->nconns >= SERVER_MAX_CONNS) {")],
     ["test_fairness.py::test_root_keeps_its_reserve_when_users_fill_the_rest"]),
    ("a busy target retried within its turn (the loop held until it is free)", "daemon/queue.c",
     [("\tr = action_start(&e->caller, e->action, e->deadline_ms, t, e->res, &e->job, &e->wake_ms);\n",
       "\tr = action_start(&e->caller, e->action, e->deadline_ms, t, e->res, &e->job, &e->wake_ms);\n"
       "\twhile (r == ACTION_AGAIN) {\n"
       "\t\tnanosleep(&(struct timespec){ 0, 1000000 }, NULL);\n"
       "\t\tr = action_step(e->job, &e->wake_ms);\n"
       "\t}\n")],
     ["test_fairness.py::test_busy_target_does_not_hold_up_others_parked_in_the_bytes"]),
    ("two operations on one process let through at once", "daemon/queue.c",
     [("\t\tif (a != e && a->holds == pid)\n", "\t\tif (a != e && a->holds == pid && 0)\n")],
     ["test_fairness.py::test_guard_and_unguard_of_one_process_never_interleave"]),
    ("the followed process killed with the daemon (PTRACE_O_EXITKILL)", "daemon/ptrace.c",
     [("PTRACE_SEIZE, tid, 0, PTRACE_O_TRACEEXEC | PTRACE_O_TRACESYSGOOD, NULL);",
       "PTRACE_SEIZE, tid, 0, PTRACE_O_TRACEEXEC | PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL, NULL);")],
     ["test_atexec.py::test_daemon_killed_while_armed"]),
    ("a failed verify at an exec answered as guarded", "daemon/exec.c",
     [("\tif (r < 0)\n\t\treturn r;   /* this round's words are restored",
       "\tif (r < 0 && 0)\n\t\treturn r;   /* this round's words are restored")],
     ["test_atexec.py::test_verify_failure_at_exec_leaves_the_original"]),
    ("a trap planted at the new program's entry (a breakpoint left if the daemon dies)",
     "daemon/exec.c",
     [("\tr = guard_mapped(j);\n\tif (r < 0)\n\t\treturn r;\n\t/* No loader",
       "\tr = guard_mapped(j);\n\tif (r < 0)\n\t\treturn r;\n"
       "\t{ struct ptrace_syscall_stop e; uint64_t w, pc = 0; char p[64], b[4096];"
       " FILE *fp; snprintf(p, sizeof(p), \"/proc/%d/syscall\", j->pid);"
       " fp = fopen(p, \"r\"); if (fp && fgets(b, sizeof(b), fp)) {"
       " char *s = strrchr(b, ' '); if (s) pc = strtoull(s, NULL, 16); }"
       " if (fp) fclose(fp); (void)e;"
       " if (pc && ptrace_peek_word(j->pid, pc, &w) == 0)"
       " ptrace_poke_word(j->pid, pc, (w & ~(uint64_t)0xff) | 0xcc); }\n\t/* No loader")],
     ["test_atexec.py::test_daemon_killed_while_following",
      "test_atexec.py::test_run_guards_before_main"]),
    # -- bugs the suite caught already; they must stay caught --
    ("activeness check always clear", "daemon/stackcheck.c",
     [("\tmemset(hit, 0, sizeof(*hit));\n\thit->tid = tid;\n\t/*\n\t * The addresses its registers hold first",
       "\tmemset(hit, 0, sizeof(*hit));\n\thit->tid = tid;\n\treturn 0;\n\t/*\n\t * The addresses its registers hold first")],
     ["test_sigframes.py"]),
    ("no resume after a busy answer", "daemon/patch.c",
     [("\tr2 = ptrace_resume_all(&w);\n\ta->pause_us",
       "\tr2 = r == -BTG_ERR_BUSY ? 0 : ptrace_resume_all(&w);\n\ta->pause_us")],
     ["test_sigframes.py"]),
    ("authorization by effective uid only", "daemon/auth.c",
     [("\tfor (int i = 0; i < 3; i++)\n\t\tif (st->uid[i] != caller->uid)",
       "\tfor (int i = 1; i < 2; i++)\n\t\tif (st->uid[i] != caller->uid)")],
     ["unit"]),
    ("the pin never checked", "daemon/patch.c",
     [("\tif (other) {", "\tif (other && 0) {"),
      ("\tif (exited || r < 0) {", "\tif ((exited || r < 0) && 0) {")],
     ["test_pidreuse.py"]),
    ("foreign bytes taken as original", "daemon/stub.c",
     [("\t\treturn PROTO_SITE_ORIGINAL;\n\treturn PROTO_SITE_FOREIGN;\n}",
       "\t\treturn PROTO_SITE_ORIGINAL;\n\treturn PROTO_SITE_ORIGINAL;\n}")],
     ["test_guard.py::test_state_foreign_is_never_written"]),
    ("the stub written one byte off", "daemon/sites.c",
     [("\treturn s->addr + s->plan.offset;", "\treturn s->addr + s->plan.offset + 1;")],
     ["test_guard.py::test_guard_then_unguard_is_observable"]),
    ("a job-control stopped target continued", "daemon/ptrace.c",
     [("\t\tif (r == 0)\n\t\t\tcontinue;\n\t\tif (r == -ESRCH) {",
       "\t\tif (r == 0) {\n\t\t\tif (t->job_stopped)\n\t\t\t\tkill(t->tid, SIGCONT);\n\t\t\tcontinue;\n\t\t}\n\t\tif (r == -ESRCH) {")],
     ["test_prod_states.py::test_job_control_stopped_stays_stopped"]),
    ("a decoder length check dropped", "proto/proto.c",
     [("\tif (h.length > PROTO_MAX_PAYLOAD)", "\tif (h.length > PROTO_MAX_PAYLOAD * 16u)")],
     ["unit"]),
    ("client exit status 0 on failure", "client/main.c",
     [("\t\t\treturn n->failed ? EXIT_FAILED : EXIT_OK;", "\t\t\treturn n->failed ? EXIT_OK : EXIT_OK;")],
     ["test_client_cli.py"]),
    ("--tree children not listed again after the patch", "daemon/queue.c",
     [("\tif (!e->tree || e->relists", "\tif (1 || !e->tree || e->relists")],
     ["test_prod_children.py::test_tree_finds_children_forked_before_the_parent_was_patched"]),
    ("a selector picks processes the caller may not act on", "daemon/action.c",
     [("\tif (authorize(&x->caller, t, pid, &facts) < 0) {",
       "\tif (0 && authorize(&x->caller, t, pid, &facts) < 0) {")],
     ["test_select.py::test_user_and_all_for_a_user_see_only_its_own"]),
    ("the report ignores that the reached definition is guarded", "daemon/report.c",
     [("\tif (res->sites[bound].state == PROTO_SITE_GUARDED) {", "\tif (0) {")],
     ["test_select.py::test_at_risk_report_exit_status_and_prometheus"]),
    # -- the auto-guard policy --
    ("exclusions ignored", "daemon/policy.c",
     [("\t\tif (r->exclude && rule_matches(r, proc, &risk))\n",
       "\t\tif (r->exclude && rule_matches(r, proc, &risk) && 0)\n")],
     ["test_policy.py::test_exclusions_hold"]),
    ("a late load not noticed (a process asked about only when new)", "daemon/watch.c",
     [("\tif (old && old->vsize == now.vsize && old->objects && !again) {",
       "\tif (old && old->objects && !again) {")],
     ["test_policy.py::test_forked_workers_that_load_a_second_backtrace_end_fully_guarded"]),
]
