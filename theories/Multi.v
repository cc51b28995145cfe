(** * Multi-root patterns

    A multi-root pattern is a tuple of single-root patterns [p1, …, pk]
    over one set of variables (term variables [0..n-1], operator variables
    [0..m-1], shared by every root) and a guard [g] over all of them (the
    cross-root [assert]s). It matches a tuple of *distinct* nodes
    [t1, …, tk] under one substitution:

    [mmatches σ ψ [p1..pk] g [t1..tk]] := [pᵢ @ ⟨σ, ψ⟩ ≈ tᵢ] for every [i]
    (the single-root relation of [Declarative.v], [matches_list]),
    [⟦g[σ, ψ]⟧ = true], and the [tᵢ] pairwise distinct.

    The algorithm ([match_multi], the C API's [pypm_match_multi]) fixes
    [t1], the node being visited, and finds the others by *upward
    traversal* (the RFC's [get_accepting_ops]/[choose_op]): when root [i]'s
    operator has a variable [x] as its [l]-th argument and [x] lies on an
    operator-only path [π] below an earlier root [j] ([anchor]), root [i]'s
    candidates are the users of the node at [π] below the [j]-th chosen
    node whose [l]-th child it is ([cand_fn]), read from the graph's users
    table ([users_map], computed once per graph from the node table); a
    root with no anchor takes the nodes [0..N-1] its root-operator index
    admits ([mcands]; a node outside it cannot match,
    [RootIndex.root_index_sound]). Every node that can match is a
    candidate ([up_cands_complete]). It is a depth-first search, a choice
    point backtracked like an alternate: for root [i] it
    tries each candidate not already used, runs the machine of
    [Interpreter.v] on the prefix [match(p1, t1) … match(pᵢ, c)] (one
    continuation, one substitution shared by all roots: the single-root
    machine started with the earlier roots' bindings), prunes the
    candidate when that prefix has no match (failure soundness), and
    otherwise goes on to root [i+1]; at the end the whole continuation,
    the cross-root guard included, is run. So the soundness of the
    single-root machine is reused as it is: success and failure soundness
    of a continuation ([run_start_success], [run_start_fail]). The search
    is proved once for any candidate functions that are complete and stay
    below [N] ([match_multi_c_sound], [match_multi_c_fail_sound]) and
    instantiated for upward traversal ([match_multi]) and for the index
    alone ([match_multi_idx], the previous version, kept for benchmarks).

    Theorems: [match_multi_sound] (an answer is a declarative match of
    distinct nodes, the first at the visited node), [match_multi_fail_sound]
    ("no match": no tuple of distinct nodes with the first at the visited
    node matches, under any substitution of the variables), and for
    [match_all_multi] "every set, once": every entry is a match
    ([match_all_multi_sound]), each set of nodes is reported at most once,
    not once per permutation ([match_all_multi_once]), and, unless a run
    ran out of fuel, every tuple of nodes that matches has its set among
    the entries ([match_all_multi_sets]), each at the smallest node that
    is the first root of a match with that set ([match_all_multi_first]).
    With [multi_fuel_bound] steps (descending tables, [Fuel.v]'s bound
    chained over the roots) no run is out of fuel ([match_multi_fuel],
    [match_all_multi_fuel]), so a tuple that matches gets a match
    ([match_multi_fuel_complete]).
    These hold for substitutions of the shared variables; with [mp_scoped]
    (every root's definition has at most the shared variables as
    parameters) they hold for any substitution ([mmatches_scope] and the
    [_any] forms, which [Spec.v] states).
    [mmatches_one]: with one root and the guard [true], [mmatches] is the single-root relation (the
    single-root theorems are the one-root case). [mmatches_perm]: the
    relation does not depend on the order of the roots (any root order
    finds the same sets of nodes). *)

From Coq Require Import List Bool Arith Lia Sorted Permutation.
From PyPM Require Import Syntax Subst Declarative Env Algorithmic Interpreter Soundness
  RootIndex Entry.
From PyPM Require Fuel.
Import ListNotations.

(** ** The declarative relation *)

Definition mmatches (G : graph) (D : list pdef) (σ : tsubst) (ψ : fsubst)
    (ps : list pattern) (g : guard) (ts : list node) : Prop :=
  matches_list G D σ ψ ps ts /\ eval_guard G σ ψ g = Some true /\ NoDup ts.

(** A multi-root pattern: variables [0..mp_n-1] / [0..mp_m-1], the roots
    (definitions of the table, whose bodies read their variables as the
    shared ones) and the cross-root guard. *)
Record mpat := mkMpat { mp_n : nat; mp_m : nat; mp_roots : list nat; mp_guard : guard }.

Inductive manswer :=
| MMatch (ts : list node) (bs : list (var * node)) (fbs : list (fvar * symbol))
    (** the roots' nodes, in root order, and the bindings of the variables *)
| MNoMatch
| MOutOfFuel.

(** Same set of nodes. *)
Definition same_set (a b : list node) : bool := subset a b && subset b a.

Lemma same_set_iff : forall a b, same_set a b = true <-> (forall x, In x a <-> In x b).
Proof.
  intros a b. unfold same_set. rewrite andb_true_iff. split.
  - intros [H1 H2] x. split; apply subset_In; assumption.
  - intros H. unfold subset. rewrite !forallb_forall. split; intros x Hx;
      apply memb_In; apply H; exact Hx.
Qed.

Lemma same_set_sym : forall a b, same_set a b = same_set b a.
Proof. intros. unfold same_set. apply andb_comm. Qed.

(** ** Lists over every node, in constant stack

    The extracted code builds these over every node of the graph. Coq's
    [seq], [filter] and [rev] extract to recursions as deep as the list
    ([rev] in quadratic time): a stack overflow on large graphs. The
    versions here use an accumulator (tail calls, constant stack) and are
    proved equal to the standard ones, so the theorems stated with those
    hold of them. *)
Fixpoint seq_acc (s k : nat) (acc : list nat) : list nat :=
  match k with 0 => acc | S k' => seq_acc s k' (s + k' :: acc) end.

(** [seq s k], built from the top down. *)
Definition seq_tr (s k : nat) : list nat := seq_acc s k [].

Lemma seq_acc_app : forall s k acc, seq_acc s k acc = seq s k ++ acc.
Proof.
  intros s k. induction k as [|k IH]; intros acc; [reflexivity|].
  cbn [seq_acc]. rewrite IH, seq_S, <- app_assoc. reflexivity.
Qed.

Lemma seq_tr_eq : forall s k, seq_tr s k = seq s k.
Proof. intros s k. unfold seq_tr. rewrite seq_acc_app. apply app_nil_r. Qed.

Fixpoint filter_upto_acc (f : nat -> bool) (k : nat) (acc : list nat) : list nat :=
  match k with 0 => acc | S k' => filter_upto_acc f k' (if f k' then k' :: acc else acc) end.

(** [filter f (seq 0 k)], built from the top down. *)
Definition filter_upto (f : nat -> bool) (k : nat) : list nat := filter_upto_acc f k [].

Lemma filter_upto_acc_app : forall f k acc,
  filter_upto_acc f k acc = filter f (seq 0 k) ++ acc.
Proof.
  intros f k. induction k as [|k IH]; intros acc; [reflexivity|].
  cbn [filter_upto_acc]. rewrite IH, seq_S, filter_app. simpl.
  destruct (f k); simpl; rewrite <- app_assoc; reflexivity.
Qed.

Lemma filter_upto_eq : forall f k, filter_upto f k = filter f (seq 0 k).
Proof. intros f k. unfold filter_upto. rewrite filter_upto_acc_app. apply app_nil_r. Qed.

Section Multi.
  Variable G : graph.
  Variable D : list pdef.

  (** *** One root: the single-root relation *)
  Lemma mmatches_one : forall σ ψ p t,
    mmatches G D σ ψ [p] GTrue [t] <-> matches G D σ ψ p t.
  Proof.
    intros σ ψ p t. unfold mmatches. split.
    - intros [H _]. inversion H; subst. assumption.
    - intros H. split; [constructor; [exact H | constructor]|].
      split; [reflexivity|]. constructor; [intros []|constructor].
  Qed.

  (** *** The order of the roots does not matter *)
  Lemma matches_list_combine : forall σ ψ ps ts,
    matches_list G D σ ψ ps ts <->
    length ps = length ts /\ Forall (fun pt => matches G D σ ψ (fst pt) (snd pt)) (combine ps ts).
  Proof.
    intros σ ψ ps. induction ps as [|p ps IH]; intros ts; destruct ts as [|t ts]; simpl.
    - split; [intros _; split; auto | intros _; constructor].
    - split; [intros H; inversion H | intros [H _]; discriminate].
    - split; [intros H; inversion H | intros [H _]; discriminate].
    - split.
      + intros H. inversion H; subst. apply IH in H7 as [Hl Hf]. split; [lia|].
        constructor; assumption.
      + intros [Hl Hf]. inversion Hf; subst. constructor; [assumption|].
        apply IH. split; [lia | assumption].
  Qed.

  Lemma map_snd_combine : forall (ps : list pattern) (ts : list node),
    length ps = length ts -> map snd (combine ps ts) = ts.
  Proof.
    induction ps as [|p ps IH]; intros ts Hl; destruct ts; simpl in *; try discriminate; auto.
    f_equal. apply IH. lia.
  Qed.

  Lemma mmatches_perm1 : forall σ ψ ps g ts ps' ts',
    length ps' = length ts' ->
    Permutation (combine ps ts) (combine ps' ts') ->
    mmatches G D σ ψ ps g ts -> mmatches G D σ ψ ps' g ts'.
  Proof.
    intros σ ψ ps g ts ps' ts' Hl' Hp [Hm [Hg Hn]]. apply matches_list_combine in Hm as [Hl Hf].
    split; [|split; [exact Hg|]].
    - apply matches_list_combine. split; [exact Hl'|].
      eapply Permutation_Forall; [exact Hp | exact Hf].
    - rewrite <- (map_snd_combine ps' ts' Hl'). rewrite <- (map_snd_combine ps ts Hl) in Hn.
      eapply Permutation_NoDup; [apply Permutation_map; exact Hp | exact Hn].
  Qed.

  (** Permuting the roots together with their nodes keeps a match: any
      root order finds the same sets of nodes. *)
  Theorem mmatches_perm : forall σ ψ ps g ts ps' ts',
    length ps = length ts -> length ps' = length ts' ->
    Permutation (combine ps ts) (combine ps' ts') ->
    (mmatches G D σ ψ ps g ts <-> mmatches G D σ ψ ps' g ts').
  Proof.
    intros. split; apply mmatches_perm1; auto. apply Permutation_sym. assumption.
  Qed.

  (** ** The machine on a continuation of several matches *)

  Definition mstart (n m : nat) (k : cont) : state := Running empty empty (max n m) [] k.

  Definition run_prefix (fuel n m : nat) (ps : list pattern) (ts : list node) : outcome :=
    run G D fuel (mstart n m (push_matches ps ts (root_env n m) [])).

  Definition run_full (fuel n m : nat) (ps : list pattern) (g : guard) (ts : list node)
    : outcome :=
    run G D fuel (mstart n m (push_matches ps ts (root_env n m) [AGuard g (root_env n m)])).

  (** Success soundness of a continuation: every action holds. *)
  Lemma run_start_success : forall fuel n m k Θ Φ,
    run G D fuel (mstart n m k) = OSuccess Θ Φ -> Forall (holds G D Θ Φ) k.
  Proof.
    intros fuel n m k Θ Φ H. apply run_refines_success in H.
    assert (Hs : ssol G D Θ Φ (mstart n m k))
      by (eapply ssol_star_back; [exact H | split; reflexivity]).
    destruct Hs as [[_ [_ Hk]]|Hstk]; [exact Hk | inversion Hstk].
  Qed.

  (** Failure soundness of a well-formed continuation: nothing completes
      it. *)
  Lemma run_start_fail : forall fuel n m k Θ' Φ',
    wf_defs D = true ->
    wfk D (bound_in empty) (bound_in empty) k ->
    Forall (action_below (max n m)) k ->
    run G D fuel (mstart n m k) = OFailure ->
    ~ Forall (holds G D Θ' Φ') k.
  Proof.
    intros fuel n m k Θ' Φ' Hd Hw Hb Hr Hk. apply run_refines_failure in Hr.
    assert (Hf : fsol G D Failure).
    { eapply fsol_star; [exact Hd | exact Hr | |].
      - simpl. split; [|constructor]. repeat split; auto.
        + intros g v Hg. rewrite lookup_empty in Hg. discriminate.
        + intros g v Hg. rewrite lookup_empty in Hg. discriminate.
      - simpl. left. exists Θ', Φ'.
        split; [apply sub_empty | split; [apply sub_empty | exact Hk]]. }
    exact Hf.
  Qed.

  Lemma root_env_below : forall n m, env_below (max n m) (root_env n m).
  Proof.
    intros n m. split; simpl; intros x g Hx; rewrite vfind_ident_map in Hx;
      destruct (Nat.ltb x _) eqn:L; inversion Hx; subst; apply Nat.ltb_lt in L; lia.
  Qed.

  (** Well-formedness of a multi-root pattern: each root is well formed
      ([wfb]) and the cross-root guard reads variables the roots bind. *)
  Definition wf_multi (ps : list pattern) (g : guard) : bool :=
    forallb (wfb D) ps && subset (guard_vars g) (flat_map (binds D) ps)
    && subset (guard_fvars g) (flat_map (fbinds D) ps).

  Lemma wfk_full : forall ps ts g ρ,
    length ps = length ts -> wf_multi ps g = true ->
    wfk D (bound_in empty) (bound_in empty) (push_matches ps ts ρ [AGuard g ρ]).
  Proof.
    intros ps ts g ρ Hl Hw. unfold wf_multi in Hw.
    apply andb_true_iff in Hw as [Hw HF]. apply andb_true_iff in Hw as [Hw HV].
    apply wfk_push; auto. simpl. split; [|split; [|exact I]].
    - intros x s Hx Hs. right. exists x. split; [exact (subset_In _ _ HV x Hx) | exact Hs].
    - intros F s HF' Hs. right. exists F. split; [exact (subset_In _ _ HF F HF') | exact Hs].
  Qed.

  Lemma forallb_firstn : forall A (f : A -> bool) j l,
    forallb f l = true -> forallb f (firstn j l) = true.
  Proof.
    intros A f j. induction j as [|j IH]; intros l H; [reflexivity|].
    destruct l as [|a l]; [reflexivity|]. simpl in *.
    apply andb_true_iff in H as [H1 H2]. rewrite H1, IH; auto.
  Qed.

  Lemma wfk_prefix : forall ps ts ρ,
    length ps = length ts -> forallb (wfb D) ps = true ->
    wfk D (bound_in empty) (bound_in empty) (push_matches ps ts ρ []).
  Proof. intros ps ts ρ Hl Hw. apply wfk_push; auto. exact I. Qed.

  Lemma below_full : forall n m ps ts g,
    Forall (action_below (max n m)) (push_matches ps ts (root_env n m) [AGuard g (root_env n m)]).
  Proof.
    intros. apply Forall_below_push; [apply root_env_below|].
    constructor; [apply root_env_below | constructor].
  Qed.

  Lemma below_prefix : forall n m ps ts,
    Forall (action_below (max n m)) (push_matches ps ts (root_env n m) []).
  Proof. intros. apply Forall_below_push; [apply root_env_below | constructor]. Qed.

  Lemma matches_list_ext : forall σ ψ σ' ψ' ps ts,
    (forall x, σ x = σ' x) -> (forall F, ψ F = ψ' F) ->
    matches_list G D σ ψ ps ts -> matches_list G D σ' ψ' ps ts.
  Proof.
    intros σ ψ σ' ψ' ps ts Hs Hf H. induction H; constructor; auto.
    eapply matches_ext; eauto.
  Qed.

  Lemma matches_list_prefix : forall σ ψ a b ps,
    matches_list G D σ ψ ps (a ++ b) -> matches_list G D σ ψ (firstn (length a) ps) a.
  Proof.
    intros σ ψ a. induction a as [|t a IH]; intros b ps H; simpl; [constructor|].
    inversion H; subst. simpl. constructor; [assumption | eapply IH; eassumption].
  Qed.

  Lemma matches_list_length : forall σ ψ ps ts,
    matches_list G D σ ψ ps ts -> length ps = length ts.
  Proof. intros σ ψ ps ts H. induction H; simpl; auto. Qed.

  (** A declarative match of the variables [0..n-1] / [0..m-1], read as
      the machine's slots. *)
  Lemma holds_of_fun : forall n m σ ψ ps ts k,
    (forall x, n <= x -> σ x = None) -> (forall F, m <= F -> ψ F = None) ->
    matches_list G D σ ψ ps ts -> Forall (holds G D (of_fun n σ) (of_fun m ψ)) k ->
    Forall (holds G D (of_fun n σ) (of_fun m ψ)) (push_matches ps ts (root_env n m) k).
  Proof.
    intros n m σ ψ ps ts k Hσ Hψ Hm Hk. apply Forall_push; [|exact Hk].
    eapply matches_list_ext; [| |exact Hm]; intros y; unfold tsub, fsub; simpl;
      symmetry; apply gsub_ident_of_fun; auto.
  Qed.

  (** ** The search *)

  Inductive mres := MFound (ts : list node) (Θ Φ : subst) | MNone | MOut.

  Fixpoint first_of (f : node -> mres) (cs : list node) : mres :=
    match cs with
    | [] => MNone
    | c :: cs' => match f c with MNone => first_of f cs' | r => r end
    end.

  (** [incands ts suf rest]: each node of [suf] is among the candidates
      its root's function of [rest] gives for the nodes bound before it
      ([ts], then the earlier nodes of [suf]). *)
  Fixpoint incands (ts suf : list node) (rest : list (list node -> list node)) : Prop :=
    match rest, suf with
    | [], [] => True
    | f :: rest', c :: suf' => In c (f ts) /\ incands (ts ++ [c]) suf' rest'
    | _, _ => False
    end.

  Lemma incands_length : forall rest ts suf, incands ts suf rest -> length suf = length rest.
  Proof.
    induction rest as [|f rest IH]; intros ts [|c suf] H; simpl in H; try contradiction; auto.
    simpl. f_equal. eapply IH. apply H.
  Qed.

  (** [ts]: the nodes chosen for the first roots; [rest]: for each other
      root, the function giving its candidates from the nodes bound so far
      (the users of a bound node, or the index's nodes). *)
  Fixpoint search (fuel n m : nat) (ps : list pattern) (g : guard) (ts : list node)
      (rest : list (list node -> list node)) : mres :=
    match rest with
    | [] =>
        match run_full fuel n m ps g ts with
        | OSuccess Θ Φ => MFound ts Θ Φ
        | OFailure => MNone
        | OOutOfFuel => MOut
        end
    | f :: rest' =>
        first_of (fun c =>
          if memb c ts then MNone else
          match run_prefix fuel n m (firstn (S (length ts)) ps) (ts ++ [c]) with
          | OSuccess _ _ => search fuel n m ps g (ts ++ [c]) rest'
          | OFailure => MNone
          | OOutOfFuel => MOut
          end) (f ts)
    end.

  Lemma first_of_found : forall f cs ts Θ Φ,
    first_of f cs = MFound ts Θ Φ -> exists c, In c cs /\ f c = MFound ts Θ Φ.
  Proof.
    intros f cs. induction cs as [|c cs IH]; intros ts Θ Φ H; simpl in H; [discriminate|].
    destruct (f c) eqn:E.
    - inversion H; subst. exists c. split; [left; reflexivity | exact E].
    - destruct (IH _ _ _ H) as [c' [Hc' Hf]]. exists c'. split; [right|]; assumption.
    - discriminate.
  Qed.

  Lemma first_of_none : forall f cs, first_of f cs = MNone -> forall c, In c cs -> f c = MNone.
  Proof.
    intros f cs. induction cs as [|c cs IH]; intros H c' Hc; simpl in *; [destruct Hc|].
    destruct (f c) eqn:E; try discriminate.
    destruct Hc as [<-|Hc]; [exact E | apply IH; assumption].
  Qed.

  Lemma NoDup_snoc : forall (ts : list node) c, NoDup ts -> ~ In c ts -> NoDup (ts ++ [c]).
  Proof.
    intros ts c Hn Hc. eapply Permutation_NoDup; [apply Permutation_cons_append|].
    constructor; assumption.
  Qed.

  Lemma search_found : forall fuel n m ps g rest ts ts' Θ Φ,
    search fuel n m ps g ts rest = MFound ts' Θ Φ ->
    run_full fuel n m ps g ts' = OSuccess Θ Φ /\
    (exists suf, ts' = ts ++ suf /\ incands ts suf rest) /\
    (NoDup ts -> NoDup ts').
  Proof.
    intros fuel n m ps g rest. induction rest as [|cs rest IH]; intros ts ts' Θ Φ H;
      cbn [search] in H.
    - destruct (run_full fuel n m ps g ts) eqn:E; inversion H; subst.
      split; [exact E|]. split; [exists []; split; [rewrite app_nil_r; reflexivity | exact I]|].
      auto.
    - apply first_of_found in H as [c [Hc H]].
      destruct (memb c ts) eqn:Hm; [discriminate|].
      destruct (run_prefix _ _ _ _ _) eqn:E; try discriminate.
      apply IH in H as [Hr [[suf [-> Hs]] Hn]]. split; [exact Hr|]. split.
      + exists (c :: suf). split; [rewrite <- app_assoc; reflexivity | split; assumption].
      + intros Hts. apply Hn. apply NoDup_snoc; [exact Hts|].
        intros Hin. apply memb_In in Hin. congruence.
  Qed.

  Lemma search_none : forall fuel n m ps g rest ts,
    wf_defs D = true -> wf_multi ps g = true ->
    search fuel n m ps g ts rest = MNone ->
    forall suf σ ψ, incands ts suf rest ->
    (forall x, n <= x -> σ x = None) -> (forall F, m <= F -> ψ F = None) ->
    ~ mmatches G D σ ψ ps g (ts ++ suf).
  Proof.
    intros fuel n m ps g rest. induction rest as [|cs rest IH];
      intros ts Hd Hw H suf σ ψ Hs Hσ Hψ [Hm [Hg Hn]]; cbn [search] in H.
    - destruct suf; [|contradiction]. rewrite app_nil_r in *.
      destruct (run_full fuel n m ps g ts) eqn:E; try discriminate.
      assert (Hl : length ps = length ts) by (eapply matches_list_length; eauto).
      eapply run_start_fail; [exact Hd | apply wfk_full; eauto | apply below_full | exact E |].
      apply holds_of_fun; auto. constructor; [|constructor]. simpl.
      rewrite <- Hg. apply eval_guard_agree; intros y _; unfold tsub, fsub; simpl;
        apply gsub_ident_of_fun; auto.
    - destruct suf as [|c suf']; [contradiction|]. destruct Hs as [Hc Hs'].
      assert (Hf := first_of_none _ _ H c Hc). cbv beta in Hf.
      assert (Hnin : ~ In c ts).
      { intros Hin. apply NoDup_remove_2 in Hn. apply Hn. apply in_or_app. left. exact Hin. }
      destruct (memb c ts) eqn:Hmb; [apply memb_In in Hmb; contradiction|].
      destruct (run_prefix fuel n m (firstn (S (length ts)) ps) (ts ++ [c])) eqn:E.
      + apply (IH (ts ++ [c]) Hd Hw Hf suf' σ ψ Hs' Hσ Hψ).
        rewrite <- app_assoc. simpl. split; [exact Hm | split; assumption].
      + replace (ts ++ c :: suf') with ((ts ++ [c]) ++ suf') in Hm
          by (rewrite <- app_assoc; reflexivity).
        apply matches_list_prefix in Hm.
        rewrite app_length, Nat.add_comm in Hm. simpl in Hm.
        assert (Hl := matches_list_length _ _ _ _ Hm).
        eapply run_start_fail; [exact Hd | | apply below_prefix | exact E |].
        * apply wfk_prefix; [exact Hl|]. apply forallb_firstn.
          unfold wf_multi in Hw. apply andb_true_iff in Hw as [Hw _].
          apply andb_true_iff in Hw as [Hw _]. exact Hw.
        * apply holds_of_fun; auto.
      + discriminate.
  Qed.

  (** *** Which tuple the search finds *)

  (** The candidate tuples extending [ts] through [rest], in the order the
      search tries them: depth first, each root's candidates in the order
      of its candidate list, a node already chosen skipped. *)
  Fixpoint ctuples (ts : list node) (rest : list (list node -> list node)) : list (list node) :=
    match rest with
    | [] => [ts]
    | f :: rest' =>
        flat_map (fun c => if memb c ts then [] else ctuples (ts ++ [c]) rest') (f ts)
    end.

  Lemma ctuples_incands : forall rest ts u,
    In u (ctuples ts rest) -> exists suf, u = ts ++ suf /\ incands ts suf rest.
  Proof.
    induction rest as [|f rest IH]; intros ts u H; simpl in H.
    - destruct H as [<-|[]]. exists []. split; [rewrite app_nil_r; reflexivity | exact I].
    - apply in_flat_map in H as [c [Hc H]]. destruct (memb c ts); [destruct H|].
      destruct (IH _ _ H) as [suf [-> Hs]]. exists (c :: suf).
      split; [rewrite <- app_assoc; reflexivity | split; assumption].
  Qed.

  Lemma first_of_split : forall h cs ts Θ Φ,
    first_of h cs = MFound ts Θ Φ ->
    exists cs1 c cs2, cs = cs1 ++ c :: cs2 /\ first_of h cs1 = MNone /\ h c = MFound ts Θ Φ.
  Proof.
    intros h cs. induction cs as [|c cs IH]; intros ts Θ Φ H; simpl in H; [discriminate|].
    destruct (h c) eqn:E.
    - inversion H; subst. exists [], c, cs. auto.
    - destruct (IH _ _ _ H) as (cs1 & c' & cs2 & -> & H1 & H2).
      exists (c :: cs1), c', cs2. simpl. rewrite E. auto.
    - discriminate.
  Qed.

  (** The search's answer is the first candidate tuple, in the order of
      [ctuples], that matches: every tuple before it matches under no
      substitution of the variables. *)
  Lemma search_first : forall fuel n m ps g rest ts ts' Θ Φ,
    wf_defs D = true -> wf_multi ps g = true ->
    search fuel n m ps g ts rest = MFound ts' Θ Φ ->
    exists pre post, ctuples ts rest = pre ++ ts' :: post /\
      forall u σ ψ, In u pre ->
        (forall x, n <= x -> σ x = None) -> (forall F, m <= F -> ψ F = None) ->
        ~ mmatches G D σ ψ ps g u.
  Proof.
    intros fuel n m ps g rest. induction rest as [|f rest IH]; intros ts ts' Θ Φ Hd Hw H;
      cbn [search] in H.
    - destruct (run_full fuel n m ps g ts); inversion H; subst.
      exists [], []. split; [reflexivity | intros u σ ψ []].
    - apply first_of_split in H as (cs1 & c & cs2 & Hcs & Hnone & Hc).
      destruct (memb c ts) eqn:Hm; [discriminate|].
      destruct (run_prefix _ _ _ _ _) eqn:E; try discriminate.
      destruct (IH _ _ _ _ Hd Hw Hc) as (pre & post & Hct & Hpre).
      set (K := fun c => if memb c ts then [] else ctuples (ts ++ [c]) rest).
      exists (flat_map K cs1 ++ pre), (post ++ flat_map K cs2). split.
      + cbn [ctuples]. fold K. rewrite Hcs, flat_map_app. simpl.
        replace (K c) with (pre ++ ts' :: post) by (unfold K; rewrite Hm; exact (eq_sym Hct)).
        rewrite <- !app_assoc. reflexivity.
      + intros u σ ψ Hu Hσ Hψ. apply in_app_or in Hu as [Hu|Hu]; [|eapply Hpre; eauto].
        apply in_flat_map in Hu as [c' [Hc' Hu]]. unfold K in Hu.
        destruct (memb c' ts) eqn:Hm'; [destruct Hu|].
        destruct (ctuples_incands _ _ _ Hu) as [suf [-> Hs]].
        rewrite <- app_assoc. simpl.
        apply (search_none fuel n m ps g ((fun _ => cs1) :: rest) ts Hd Hw Hnone (c' :: suf));
          auto. split; assumption.
  Qed.

  (** ** The entry points *)

  (** The bodies of the roots. *)
  Fixpoint bodies (rs : list nat) : option (list pattern) :=
    match rs with
    | [] => Some []
    | r :: rs' =>
        match nth_error D r, bodies rs' with
        | Some d, Some ps => Some (body d :: ps)
        | _, _ => None
        end
    end.

  (** Candidates of each later root by the index alone: the nodes
      [0..N-1] its index admits. *)
  Definition mcands (R : rindex) (N : nat) (rs : list nat) : list (list node) :=
    map (fun r => filter_upto (fun c => admits G c (ri_find R r)) N) rs.

  (** *** Upward traversal: the users of a bound node *)

  (** The users of each node, computed once per graph from the node table:
      [ufind c (users_map N)] lists the nodes [u < N] with [c] among their
      children, in increasing order. *)
  Definition ufind (c : node) (UM : VarMap.t (list node)) : list node :=
    match VarMap.find c UM with Some l => l | None => [] end.

  Definition dedup (l : list nat) : list nat :=
    fold_right (fun x acc => if memb x acc then acc else x :: acc) [] l.

  Lemma In_dedup : forall x l, In x l -> In x (dedup l).
  Proof.
    intros x l. induction l as [|y l IH]; intros H; [destruct H|]. simpl.
    destruct (memb y (dedup l)) eqn:E.
    - destruct H as [<-|H]; [apply memb_In; exact E | auto].
    - destruct H as [<-|H]; [left; reflexivity | right; auto].
  Qed.

  Definition add_user (u : node) (UM : VarMap.t (list node)) (c : node) : VarMap.t (list node) :=
    VarMap.add c (u :: ufind c UM) UM.

  Definition add_users (UM : VarMap.t (list node)) (u : node) : VarMap.t (list node) :=
    fold_left (add_user u) (dedup (children G u)) UM.

  (** [add_users] of the nodes [k-1], ..., [0], in that order. *)
  Fixpoint users_down (k : nat) (UM : VarMap.t (list node)) : VarMap.t (list node) :=
    match k with 0 => UM | S k' => users_down k' (add_users UM k') end.

  Definition users_map (N : nat) : VarMap.t (list node) :=
    users_down N (VarMap.empty (list node)).

  (** The definition by a fold over the nodes in decreasing order (the
      tail-recursive [users_down] computes it in constant stack). *)
  Lemma users_map_fold : forall N,
    users_map N = fold_left add_users (rev (seq 0 N)) (VarMap.empty (list node)).
  Proof.
    intros N. unfold users_map. generalize (VarMap.empty (list node)).
    induction N as [|k IH]; intros UM; [reflexivity|].
    cbn [users_down]. rewrite IH, seq_S, rev_app_distr. reflexivity.
  Qed.

  Lemma ufind_add_user : forall u UM c c',
    ufind c' (add_user u UM c) = if Nat.eqb c c' then u :: ufind c' UM else ufind c' UM.
  Proof.
    intros u UM c c'. unfold ufind at 1, add_user. destruct (Nat.eqb c c') eqn:E.
    - apply Nat.eqb_eq in E. subst. rewrite VarMapF.add_eq_o; reflexivity.
    - apply Nat.eqb_neq in E. rewrite VarMapF.add_neq_o; [reflexivity | exact E].
  Qed.

  Lemma add_user_fold_mono : forall u cs UM c v,
    In v (ufind c UM) -> In v (ufind c (fold_left (add_user u) cs UM)).
  Proof.
    intros u cs. induction cs as [|c0 cs IH]; intros UM c v H; simpl; [exact H|].
    apply IH. rewrite ufind_add_user. destruct (Nat.eqb c0 c); [right|]; exact H.
  Qed.

  Lemma add_user_fold_in : forall u cs UM c,
    In c cs -> In u (ufind c (fold_left (add_user u) cs UM)).
  Proof.
    intros u cs. induction cs as [|c0 cs IH]; intros UM c H; [destruct H|]. simpl.
    destruct H as [<-|H]; [|apply IH; exact H].
    apply add_user_fold_mono. rewrite ufind_add_user, Nat.eqb_refl. left; reflexivity.
  Qed.

  Lemma add_users_fold : forall us UM,
    (forall c v, In v (ufind c UM) -> In v (ufind c (fold_left add_users us UM))) /\
    (forall u c, In u us -> In c (children G u) -> In u (ufind c (fold_left add_users us UM))).
  Proof.
    induction us as [|u us IH]; intros UM; simpl.
    { split; [auto | intros u c []]. }
    split.
    - intros c v H. apply (proj1 (IH _)). unfold add_users. apply add_user_fold_mono. exact H.
    - intros u' c [<-|Hu] Hc.
      + apply (proj1 (IH _)). unfold add_users. apply add_user_fold_in. apply In_dedup. exact Hc.
      + apply (proj2 (IH _)); assumption.
  Qed.

  (** The users table is complete: every node [u < N] is a user of each
      of its children. *)
  Theorem users_map_complete : forall N u c,
    u < N -> In c (children G u) -> In u (ufind c (users_map N)).
  Proof.
    intros N u c Hu Hc. rewrite users_map_fold. apply add_users_fold; [|exact Hc].
    apply in_rev. rewrite rev_involutive. apply in_seq. lia.
  Qed.

  (** *** Where a variable is bound *)

  (** [follow t π]: the node at path [π] (child indices) below [t]. *)
  Fixpoint follow (t : node) (π : list nat) : option node :=
    match π with
    | [] => Some t
    | k :: π' => match nth_error (children G t) k with Some c => follow c π' | None => None end
    end.

  Fixpoint first_arg (f : pattern -> option (list nat)) (i : nat) (qs : list pattern)
      : option (list nat) :=
    match qs with
    | [] => None
    | q :: qs' => match f q with Some π => Some (i :: π) | None => first_arg f (S i) qs' end
    end.

  (** A path from a pattern's root to an occurrence of the (free) variable
      [x] through operators only: every match binds [x] to the node at
      that path ([vpath_sound]). [d] bounds the depth searched. *)
  Fixpoint vpath (d : nat) (x : var) (p : pattern) {struct d} : option (list nat) :=
    match d with
    | O => match p with PVar y => if Nat.eqb x y then Some [] else None | _ => None end
    | S d' =>
        match p with
        | PVar y => if Nat.eqb x y then Some [] else None
        | PApp _ qs | PFunVar _ qs => first_arg (vpath d' x) 0 qs
        | PGuard q _ | PExistsF _ q | PConstr q _ _ => vpath d' x q
        | PExists y q => if Nat.eqb x y then None else vpath d' x q
        | _ => None
        end
    end.

  Fixpoint var_args (i : nat) (qs : list pattern) : list (var * nat) :=
    match qs with
    | [] => []
    | PVar x :: qs' => (x, i) :: var_args (S i) qs'
    | _ :: qs' => var_args (S i) qs'
    end.

  (** The pairs [(x, l)]: the root's [l]-th child is the (free) variable
      [x] in every match ([uargs_sound]), i.e. the root is a user of [x]. *)
  Fixpoint uargs (d : nat) (p : pattern) : list (var * nat) :=
    match d with
    | O => []
    | S d' =>
        match p with
        | PApp _ qs | PFunVar _ qs => var_args 0 qs
        | PGuard q _ | PExistsF _ q | PConstr q _ _ => uargs d' q
        | PExists y q => filter (fun xl => negb (Nat.eqb (fst xl) y)) (uargs d' q)
        | _ => []
        end
    end.

  Lemma matches_list_nth : forall σ ψ qs ts k q,
    matches_list G D σ ψ qs ts -> nth_error qs k = Some q ->
    exists t, nth_error ts k = Some t /\ matches G D σ ψ q t.
  Proof.
    intros σ ψ qs ts k q H. revert k. induction H as [|σ ψ p ps t ts Hp Hps IH];
      intros k Hk; [destruct k; discriminate|].
    destruct k as [|k]; simpl in *; [inversion Hk; subst; exists t; auto | apply IH; exact Hk].
  Qed.

  Lemma first_arg_spec : forall f qs i π,
    first_arg f i qs = Some π ->
    exists k q π', π = (i + k) :: π' /\ nth_error qs k = Some q /\ f q = Some π'.
  Proof.
    intros f qs. induction qs as [|q qs IH]; intros i π H; simpl in H; [discriminate|].
    destruct (f q) as [π'|] eqn:E.
    - inversion H; subst. exists 0, q, π'. rewrite Nat.add_0_r. auto.
    - apply IH in H as (k & q' & π' & -> & Hk & Hf). exists (S k), q', π'.
      rewrite <- plus_n_Sm. auto.
  Qed.

  Lemma upd_other : forall A (σ : nat -> option A) y v x, Nat.eqb x y = false -> upd σ y v x = σ x.
  Proof.
    intros A σ y v x H. unfold upd. rewrite Nat.eqb_sym, H. reflexivity.
  Qed.

  Lemma vpath_sound : forall d x p σ ψ t π,
    matches G D σ ψ p t -> vpath d x p = Some π ->
    exists n, follow t π = Some n /\ σ x = Some n.
  Proof.
    induction d as [|d IH]; intros x p σ ψ t π Hm Hv.
    - destruct p; simpl in Hv; try discriminate.
      destruct (Nat.eqb x x0) eqn:E; [|discriminate]. apply Nat.eqb_eq in E. subst.
      inversion Hv; subst. inversion Hm; subst. exists t. auto.
    - destruct p; simpl in Hv; try discriminate; inversion Hm; subst;
        try (match goal with
             | Hl : matches_list _ _ _ _ _ (children _ _) |- _ =>
                 apply first_arg_spec in Hv as (k & q & π' & -> & Hk & Hq); simpl;
                 destruct (matches_list_nth _ _ _ _ _ _ Hl Hk) as (c & Hc & Hmc);
                 rewrite Hc; eapply IH; [exact Hmc | exact Hq]
             end; fail);
        try (eapply IH; [|exact Hv]; eassumption).
      + destruct (Nat.eqb x x0) eqn:E; [|discriminate]. apply Nat.eqb_eq in E. subst.
        inversion Hv; subst. exists t. auto.
      + destruct (Nat.eqb x x0) eqn:E; [discriminate|].
        match goal with Hq : matches _ _ (upd _ _ _) _ _ _ |- _ =>
          destruct (IH _ _ _ _ _ _ Hq Hv) as (n & Hf & Hx) end.
        exists n. split; [exact Hf|].
        rewrite upd_other in Hx; [exact Hx | exact E].
  Qed.

  Lemma var_args_spec : forall qs i x l,
    In (x, l) (var_args i qs) -> exists k, l = i + k /\ nth_error qs k = Some (PVar x).
  Proof.
    induction qs as [|q qs IH]; intros i x l H; simpl in H; [destruct H|].
    assert (Hr : In (x, l) (var_args (S i) qs) -> exists k, l = i + k /\ nth_error (q :: qs) k = Some (PVar x)).
    { intros H'. apply IH in H' as [k [-> Hk]]. exists (S k). rewrite <- plus_n_Sm. auto. }
    destruct q; try (apply Hr; exact H).
    destruct H as [H|H]; [inversion H; subst; exists 0; rewrite Nat.add_0_r; auto | apply Hr; exact H].
  Qed.

  Lemma uargs_sound : forall d p σ ψ c x l,
    matches G D σ ψ p c -> In (x, l) (uargs d p) ->
    exists n, nth_error (children G c) l = Some n /\ σ x = Some n.
  Proof.
    induction d as [|d IH]; intros p σ ψ c x l Hm Hin; [destruct Hin|].
    destruct p; simpl in Hin; try (destruct Hin); inversion Hm; subst;
      try (match goal with
           | Hl : matches_list _ _ _ _ _ (children _ _) |- _ =>
               apply var_args_spec in Hin as [k [-> Hk]];
               destruct (matches_list_nth _ _ _ _ _ _ Hl Hk) as (n & Hn & Hmn);
               inversion Hmn; subst; exists n; auto
           end; fail);
      try (eapply IH; [|exact Hin]; eassumption).
    apply filter_In in Hin as [Hin Hne]. simpl in Hne. apply negb_true_iff in Hne.
    match goal with Hq : matches _ _ (upd _ _ _) _ _ _ |- _ =>
      destruct (IH _ _ _ _ _ _ Hq Hin) as (n & Hc & Hx) end.
    exists n. split; [exact Hc|].
    rewrite upd_other in Hx; [exact Hx | exact Hne].
  Qed.

  (** *** The candidates of a later root *)

  Definition anchor_depth : nat := 16.

  Fixpoint find_path (d : nat) (x : var) (j : nat) (earlier : list pattern)
      : option (nat * list nat) :=
    match earlier with
    | [] => None
    | q :: es =>
        match vpath d x q with
        | Some π => Some (j, π)
        | None => find_path d x (S j) es
        end
    end.

  Fixpoint first_some {A B} (f : A -> option B) (l : list A) : option B :=
    match l with
    | [] => None
    | a :: l' => match f a with Some b => Some b | None => first_some f l' end
    end.

  (** The anchor of a later root [p] given the earlier roots: [(j, π, l)]
      when [p]'s root has the variable [x] as its [l]-th child and [x] is
      at path [π] below earlier root [j]: the later root is then a user of
      that node (the RFC's upward traversal from a bound value). *)
  Definition anchor (ad : nat) (earlier : list pattern) (p : pattern)
      : option (nat * list nat * nat) :=
    first_some (fun xl => match find_path ad (fst xl) 0 earlier with
                          | Some (j, π) => Some (j, π, snd xl)
                          | None => None
                          end) (uargs ad p).

  Definition child_is (c : node) (l : nat) (n : node) : bool :=
    match nth_error (children G c) l with Some n' => Nat.eqb n' n | None => false end.

  (** The candidates of the later root [r] (body [p]) from the nodes
      bound so far: with an anchor, the users of the anchored node below
      the [j]-th bound node whose [l]-th child it is (in increasing order);
      without one (no shared variable reachable), the nodes [0..N-1] the
      index admits. Both are filtered by the index. *)
  Definition cand_fn (ad : nat) (UM : VarMap.t (list node)) (R : rindex) (N : nat)
      (earlier : list pattern) (r : nat) (p : pattern) : list node -> list node :=
    match anchor ad earlier p with
    | Some (j, π, l) => fun ts =>
        match nth_error ts j with
        | Some tj =>
            match follow tj π with
            | Some n => filter (fun c => Nat.ltb c N && child_is c l n
                                         && admits G c (ri_find R r)) (ufind n UM)
            | None => []
            end
        | None => []
        end
    | None =>
        let cs := filter_upto (fun c => admits G c (ri_find R r)) N in fun _ => cs
    end.

  Fixpoint ucands (ad : nat) (UM : VarMap.t (list node)) (R : rindex) (N : nat)
      (earlier : list pattern) (rs : list nat) (ps : list pattern)
      : list (list node -> list node) :=
    match rs, ps with
    | r :: rs', p :: ps' =>
        cand_fn ad UM R N earlier r p :: ucands ad UM R N (earlier ++ [p]) rs' ps'
    | _, _ => []
    end.

  Lemma first_some_spec : forall A B (f : A -> option B) l b,
    first_some f l = Some b -> exists a, In a l /\ f a = Some b.
  Proof.
    intros A B f l. induction l as [|a l IH]; intros b H; simpl in H; [discriminate|].
    destruct (f a) eqn:E.
    - inversion H; subst. exists a. split; [left; reflexivity | exact E].
    - apply IH in H as [a' [Ha Hf]]. exists a'. split; [right; exact Ha | exact Hf].
  Qed.

  Lemma find_path_spec : forall d x es j j' π,
    find_path d x j es = Some (j', π) ->
    exists k q, j' = j + k /\ nth_error es k = Some q /\ vpath d x q = Some π.
  Proof.
    intros d x es. induction es as [|q es IH]; intros j j' π H; cbn [find_path] in H;
      [discriminate|].
    destruct (vpath d x q) eqn:E.
    - inversion H; subst. exists 0, q. rewrite Nat.add_0_r.
      split; [reflexivity | split; [reflexivity | exact E]].
    - apply IH in H as (k & q' & -> & Hk & Hv). exists (S k), q'. rewrite <- plus_n_Sm.
      split; [reflexivity | split; [exact Hk | exact Hv]].
  Qed.

  Lemma cand_fn_below : forall ad UM R N earlier r p ts c,
    In c (cand_fn ad UM R N earlier r p ts) -> c < N.
  Proof.
    intros ad UM R N earlier r p ts c H. unfold cand_fn in H.
    destruct (anchor ad earlier p) as [[[j π] l]|].
    - destruct (nth_error ts j); [|destruct H]. destruct (follow _ π); [|destruct H].
      apply filter_In in H as [_ H]. apply andb_true_iff in H as [H _].
      apply andb_true_iff in H as [H _]. apply Nat.ltb_lt. exact H.
    - rewrite filter_upto_eq in H. apply filter_In in H as [H _]. apply in_seq in H. lia.
  Qed.

  (** Every node [c < N] matching the later root, under a substitution
      under which the earlier roots match the bound nodes, is a candidate. *)
  Lemma cand_fn_complete : forall ad N σ ψ earlier ts r d c,
    nth_error D r = Some d -> matches_list G D σ ψ earlier ts ->
    matches G D σ ψ (body d) c -> c < N ->
    In c (cand_fn ad (users_map N) (root_index D) N earlier r (body d) ts).
  Proof.
    intros ad N σ ψ earlier ts r d c Hd Hts Hc HN.
    assert (Hadm := root_index_sound G D r d σ ψ c Hd Hc).
    unfold cand_fn. destruct (anchor ad earlier (body d)) as [[[j π] l]|] eqn:Ha.
    - unfold anchor in Ha. apply first_some_spec in Ha as [[x l'] [Hin Hf]]. cbn [fst snd] in Hf.
      destruct (find_path ad x 0 earlier) as [[j' π']|] eqn:Hp; [|discriminate].
      inversion Hf; subst j' π' l'.
      apply find_path_spec in Hp as (k & q & Hk & Hq & Hv). rewrite Nat.add_0_l in Hk. subst k.
      destruct (matches_list_nth _ _ _ _ _ _ Hts Hq) as (tj & Htj & Hmq).
      destruct (vpath_sound _ _ _ _ _ _ _ Hmq Hv) as (n & Hfol & Hx).
      destruct (uargs_sound _ _ _ _ _ _ _ Hc Hin) as (n' & Hl & Hx').
      rewrite Hx in Hx'. inversion Hx'; subst n'.
      rewrite Htj, Hfol. apply filter_In. split.
      + apply users_map_complete; [exact HN|]. eapply nth_error_In. exact Hl.
      + rewrite Hadm. unfold child_is. rewrite Hl, Nat.eqb_refl.
        apply Nat.ltb_lt in HN. rewrite HN. reflexivity.
    - rewrite filter_upto_eq. apply filter_In. split; [apply in_seq; lia | exact Hadm].
  Qed.

  Lemma matches_list_app : forall σ ψ a b ta tb,
    matches_list G D σ ψ a ta -> matches_list G D σ ψ b tb ->
    matches_list G D σ ψ (a ++ b) (ta ++ tb).
  Proof.
    intros σ ψ a b ta tb H Hb. induction H; simpl; [exact Hb | constructor; auto].
  Qed.

  Lemma ucands_complete : forall ad N σ ψ rs ps earlier ts suf,
    bodies rs = Some ps -> matches_list G D σ ψ earlier ts -> matches_list G D σ ψ ps suf ->
    Forall (fun c => c < N) suf ->
    incands ts suf (ucands ad (users_map N) (root_index D) N earlier rs ps).
  Proof.
    intros ad N σ ψ rs. induction rs as [|r rs IH]; intros ps earlier ts suf Hb Hts Hm Hlt;
      simpl in Hb.
    - inversion Hb; subst. inversion Hm; subst. exact I.
    - destruct (nth_error D r) as [d|] eqn:Hd; [|discriminate].
      destruct (bodies rs) as [ps'|] eqn:E; [|discriminate]. inversion Hb; subst.
      inversion Hm; subst. inversion Hlt; subst. simpl. split.
      + eapply cand_fn_complete; [exact Hd | exact Hts | eassumption | eassumption].
      + apply IH; auto. apply matches_list_app; [exact Hts | constructor; [assumption | constructor]].
  Qed.

  Lemma ucands_below : forall ad UM R N rs ps earlier ts suf,
    incands ts suf (ucands ad UM R N earlier rs ps) -> Forall (fun c => c < N) suf.
  Proof.
    intros ad UM R N rs. induction rs as [|r rs IH]; intros ps earlier ts suf H;
      destruct ps as [|p ps]; destruct suf as [|c suf]; simpl in H; try contradiction;
      try constructor.
    - destruct H as [Hc _]. eapply cand_fn_below. exact Hc.
    - destruct H as [_ H]. eapply IH. exact H.
  Qed.

  Lemma ucands_length : forall ad UM R N rs ps earlier,
    length ps = length rs -> length (ucands ad UM R N earlier rs ps) = length rs.
  Proof.
    intros ad UM R N rs. induction rs as [|r rs IH]; intros ps earlier Hl; [reflexivity|].
    destruct ps as [|p ps]; [discriminate|]. simpl. f_equal. apply IH. simpl in Hl. lia.
  Qed.

  (** *** The search with given candidates *)

  (** [match_multi] with the index [R] and the candidate functions given
      (the library builds them once per pattern and graph). *)
  Definition match_multi_c (R : rindex) (fuel : nat) (mp : mpat)
      (cands : list (list node -> list node)) (t : node) : manswer :=
    match mp_roots mp, bodies (mp_roots mp) with
    | r1 :: _, Some (p1 :: ps') =>
        if admits G t (ri_find R r1) then
          match run_prefix fuel (mp_n mp) (mp_m mp) [p1] [t] with
          | OFailure => MNoMatch
          | OOutOfFuel => MOutOfFuel
          | OSuccess _ _ =>
              match search fuel (mp_n mp) (mp_m mp) (p1 :: ps') (mp_guard mp) [t] cands with
              | MFound ts Θ Φ => MMatch ts (project Θ (mp_n mp)) (project Φ (mp_m mp))
              | MNone => MNoMatch
              | MOut => MOutOfFuel
              end
          end
        else MNoMatch
    | _, _ => MNoMatch
    end.

  (** The candidates by upward traversal, for the users table [UM]. *)
  Definition up_cands (ad : nat) (UM : VarMap.t (list node)) (R : rindex) (N : nat) (mp : mpat)
      : list (list node -> list node) :=
    match mp_roots mp, bodies (mp_roots mp) with
    | _ :: rs, Some (p1 :: ps) => ucands ad UM R N [p1] rs ps
    | _, _ => []
    end.

  (** The candidates by the index alone (each later root: every node its
      index admits, whatever is bound). *)
  Definition idx_cands (R : rindex) (N : nat) (mp : mpat) : list (list node -> list node) :=
    map (fun l (_ : list node) => l) (mcands R N (tl (mp_roots mp))).

  (** [pypm_match_multi]: the multi-root pattern [mp] with its first root
      at [t], each later root among the users of a node bound by the
      earlier ones ([UM] is the graph's users table, [users_map N]: the
      library computes it once per graph), or among the nodes the index
      admits when it shares no variable reachable that way. *)
  Definition match_multi_u (UM : VarMap.t (list node)) (fuel N : nat) (mp : mpat) (t : node)
      : manswer :=
    let R := root_index D in match_multi_c R fuel mp (up_cands anchor_depth UM R N mp) t.

  Definition match_multi (fuel N : nat) (mp : mpat) (t : node) : manswer :=
    match_multi_u (users_map N) fuel N mp t.

  (** The same search with the index's candidates only (the previous
      version; kept for the benchmark of the traversal). *)
  Definition match_multi_idx (fuel N : nat) (mp : mpat) (t : node) : manswer :=
    let R := root_index D in match_multi_c R fuel mp (idx_cands R N mp) t.

  Lemma bodies_length : forall rs ps, bodies rs = Some ps -> length ps = length rs.
  Proof.
    induction rs as [|r rs IH]; intros ps H; simpl in H; [inversion H; reflexivity|].
    destruct (nth_error D r); [|discriminate]. destruct (bodies rs) eqn:E; [|discriminate].
    inversion H; subst. simpl. rewrite (IH _ eq_refl). reflexivity.
  Qed.

  (** Every node that matches its root is among that root's candidates. *)
  Lemma mcands_complete : forall σ ψ N rs ps suf,
    bodies rs = Some ps -> matches_list G D σ ψ ps suf -> Forall (fun c => c < N) suf ->
    Forall2 (@In node) suf (mcands (root_index D) N rs).
  Proof.
    intros σ ψ N rs. induction rs as [|r rs IH]; intros ps suf Hb Hm Hlt; simpl in Hb.
    - inversion Hb; subst. inversion Hm; subst. constructor.
    - destruct (nth_error D r) as [d|] eqn:Hd; [|discriminate].
      destruct (bodies rs) eqn:E; [|discriminate]. inversion Hb; subst.
      inversion Hm; subst. inversion Hlt; subst. simpl. constructor; [|eapply IH; eauto].
      rewrite filter_upto_eq. apply filter_In. split; [apply in_seq; lia|]. eapply root_index_sound; eauto.
  Qed.

  Lemma idx_incands : forall R N rs ts suf,
    Forall2 (@In node) suf (mcands R N rs) <->
    incands ts suf (map (fun l (_ : list node) => l) (mcands R N rs)).
  Proof.
    intros R N rs. induction rs as [|r rs IH]; intros ts suf; destruct suf as [|c suf]; simpl;
      split; intros H; try contradiction; try (inversion H; fail); auto.
    - inversion H; subst. split; [assumption | apply IH; assumption].
    - destruct H as [Hc H]. constructor; [exact Hc | eapply IH; exact H].
  Qed.

  Lemma In_mcands : forall R N rs suf,
    Forall2 (@In node) suf (mcands R N rs) -> Forall (fun c => c < N) suf.
  Proof.
    intros R N rs. induction rs as [|r rs IH]; intros suf H; inversion H; subst; [constructor|].
    constructor; [|apply IH; assumption].
    match goal with Hx : In _ (filter_upto _ _) |- _ =>
      rewrite filter_upto_eq in Hx; apply filter_In in Hx as [Hx' _]; apply in_seq in Hx'; lia end.
  Qed.

  (** What the theorems need of candidate functions: as many as later
      roots, every candidate a node [< N] ([cands_ok]), and every node
      that can match a later root, the roots before it matched, a
      candidate ([cands_complete]). *)
  Definition cands_ok (N : nat) (mp : mpat) (cands : list (list node -> list node)) : Prop :=
    (forall p1 ps, bodies (mp_roots mp) = Some (p1 :: ps) -> length cands = length ps) /\
    (forall ts suf, incands ts suf cands -> Forall (fun c => c < N) suf).

  Definition cands_complete (N : nat) (mp : mpat) (cands : list (list node -> list node))
      : Prop :=
    forall σ ψ p1 ps t suf, bodies (mp_roots mp) = Some (p1 :: ps) ->
      matches G D σ ψ p1 t -> matches_list G D σ ψ ps suf -> Forall (fun c => c < N) suf ->
      incands [t] suf cands.

  Lemma up_cands_ok : forall ad UM R N mp, cands_ok N mp (up_cands ad UM R N mp).
  Proof.
    intros ad UM R N mp. unfold up_cands. split.
    - intros p1 ps Hb. rewrite Hb. destruct (mp_roots mp) as [|r1 rs] eqn:Hr; [discriminate|].
      simpl in Hb. destruct (nth_error D r1); [|discriminate].
      destruct (bodies rs) eqn:E; [|discriminate]. inversion Hb; subst.
      assert (Hl := bodies_length _ _ E). rewrite ucands_length; [symmetry|]; exact Hl.
    - intros ts suf H. destruct (mp_roots mp) as [|r1 rs]; [destruct suf; [constructor|destruct H]|].
      destruct (bodies (r1 :: rs)) as [[|p1 ps]|];
        try (destruct suf; [constructor|destruct H]).
      eapply ucands_below. exact H.
  Qed.

  (** The users-of-bound-nodes candidates are complete. *)
  Theorem up_cands_complete : forall ad N mp,
    cands_complete N mp (up_cands ad (users_map N) (root_index D) N mp).
  Proof.
    intros ad N mp σ ψ p1 ps t suf Hb Hm1 Hm Hlt. unfold up_cands. rewrite Hb.
    destruct (mp_roots mp) as [|r1 rs] eqn:Hr; [discriminate|].
    simpl in Hb. destruct (nth_error D r1); [|discriminate].
    destruct (bodies rs) eqn:E; [|discriminate]. inversion Hb; subst.
    eapply ucands_complete; [exact E | | exact Hm | exact Hlt].
    constructor; [exact Hm1 | constructor].
  Qed.

  Lemma idx_cands_ok : forall R N mp, cands_ok N mp (idx_cands R N mp).
  Proof.
    intros R N mp. unfold idx_cands. split.
    - intros p1 ps Hb. destruct (mp_roots mp) as [|r1 rs] eqn:Hr; [discriminate|].
      simpl in Hb. destruct (nth_error D r1); [|discriminate].
      destruct (bodies rs) eqn:E; [|discriminate]. inversion Hb; subst.
      unfold mcands. simpl. rewrite !map_length. symmetry. apply bodies_length. exact E.
    - intros ts suf H. apply In_mcands with (R := R) (rs := tl (mp_roots mp)).
      eapply idx_incands. exact H.
  Qed.

  Lemma idx_cands_complete : forall N mp, cands_complete N mp (idx_cands (root_index D) N mp).
  Proof.
    intros N mp σ ψ p1 ps t suf Hb Hm1 Hm Hlt. unfold idx_cands.
    destruct (mp_roots mp) as [|r1 rs] eqn:Hr; [discriminate|].
    simpl in Hb. destruct (nth_error D r1); [|discriminate].
    destruct (bodies rs) eqn:E; [|discriminate]. inversion Hb; subst.
    apply idx_incands. eapply mcands_complete; eauto.
  Qed.

  Lemma project_props : forall Θ n,
    (forall x v, In (x, v) (project Θ n) -> x < n) /\
    StronglySorted (fun a b => fst a < fst b) (project Θ n).
  Proof.
    intros Θ n. split; [|apply project_from_sorted].
    intros x v Hx. apply project_from_In in Hx. lia.
  Qed.

  Definition msound (N : nat) (mp : mpat) (t : node) (ts : list node)
      (bs : list (var * node)) (fbs : list (fvar * symbol)) : Prop :=
    exists ps, bodies (mp_roots mp) = Some ps /\
      hd_error ts = Some t /\ Forall (fun c => c < N) (tl ts) /\
      mmatches G D (assoc bs) (assoc fbs) ps (mp_guard mp) ts /\
      (forall x v, In (x, v) bs -> x < mp_n mp) /\
      (forall F f, In (F, f) fbs -> F < mp_m mp) /\
      StronglySorted (fun a b => fst a < fst b) bs /\
      StronglySorted (fun a b => fst a < fst b) fbs.

  Lemma match_multi_c_sound : forall R fuel N mp cands t ts bs fbs,
    cands_ok N mp cands ->
    match_multi_c R fuel mp cands t = MMatch ts bs fbs -> msound N mp t ts bs fbs.
  Proof.
    intros R fuel N mp cands t ts bs fbs [Hcl Hcb] H. unfold match_multi_c in H.
    destruct (mp_roots mp) as [|r1 rs] eqn:Hr; [discriminate|].
    destruct (bodies (r1 :: rs)) as [[|p1 ps']|] eqn:Hb; try discriminate.
    destruct (admits _ _ _); [|discriminate].
    destruct (run_prefix _ _ _ _ _) as [Θ0 Φ0| |]; try discriminate.
    destruct (search _ _ _ _ _ _ _) as [ts' Θ Φ| |] eqn:Hs; try discriminate.
    inversion H; subst. apply search_found in Hs as [Hrun [[suf [-> Hsuf]] Hnd]].
    exists (p1 :: ps'). rewrite Hr. split; [exact Hb|]. split; [reflexivity|].
    split; [simpl; eapply Hcb; exact Hsuf|].
    destruct (project_props Θ (mp_n mp)) as [Hb1 Hs1].
    destruct (project_props Φ (mp_m mp)) as [Hb2 Hs2].
    split; [|repeat split; assumption].
    unfold run_full in Hrun. apply run_start_success in Hrun.
    assert (Hl : length (p1 :: ps') = length ([t] ++ suf)).
    { apply incands_length in Hsuf. rewrite (Hcl p1 ps' eq_refl) in Hsuf.
      simpl. rewrite Hsuf. reflexivity. }
    apply Forall_push_inv in Hrun as [Hm Hg]; [|exact Hl].
    apply Forall_cons_iff in Hg as [Hg _]. simpl in Hg.
    split; [|split].
    - eapply matches_list_ext; [| |exact Hm]; intros y; unfold tsub, fsub; simpl;
        rewrite assoc_project; reflexivity.
    - rewrite <- Hg. apply eval_guard_agree; intros y _; unfold tsub, fsub; simpl;
        rewrite assoc_project; reflexivity.
    - apply Hnd. constructor; [intros []|constructor].
  Qed.

  Definition mfail (N : nat) (mp : mpat) (t : node) (ps : list pattern) : Prop :=
    forall ts σ ψ, hd_error ts = Some t -> Forall (fun c => c < N) (tl ts) ->
    (forall x, mp_n mp <= x -> σ x = None) -> (forall F, mp_m mp <= F -> ψ F = None) ->
    ~ mmatches G D σ ψ ps (mp_guard mp) ts.

  Lemma match_multi_c_fail_sound : forall fuel N mp cands t ps,
    cands_complete N mp cands ->
    wf_defs D = true -> bodies (mp_roots mp) = Some ps -> wf_multi ps (mp_guard mp) = true ->
    match_multi_c (root_index D) fuel mp cands t = MNoMatch -> mfail N mp t ps.
  Proof.
    intros fuel N mp cands t ps Hcc Hd Hb Hw H ts σ ψ Ht Hlt Hσ Hψ Hmm.
    destruct ts as [|t0 suf]; [discriminate|]. simpl in Ht, Hlt. inversion Ht; subst t0.
    unfold match_multi_c in H. rewrite Hb in H.
    destruct (mp_roots mp) as [|r1 rs] eqn:Hr.
    - simpl in Hb. inversion Hb; subst. destruct Hmm as [Hm _]. inversion Hm.
    - destruct ps as [|p1 ps'].
      + destruct Hmm as [Hm _]. inversion Hm.
      + assert (Hb0 := Hb). simpl in Hb. destruct (nth_error D r1) as [d1|] eqn:Hd1; [|discriminate].
        destruct (bodies rs) as [ps''|] eqn:Hbs; [|discriminate].
        inversion Hb; subst p1 ps''.
        destruct Hmm as [Hm [Hg Hn]].
        inversion Hm as [|σ' ψ' p' ps0 t' ts0 Hm1 Hms]; subst.
        destruct (admits G t (ri_find (root_index D) r1)) eqn:Hi.
        2: { rewrite (root_index_sound G D r1 d1 σ ψ t Hd1 Hm1) in Hi. discriminate. }
        destruct (run_prefix fuel (mp_n mp) (mp_m mp) [body d1] [t]) eqn:E.
        * destruct (search _ _ _ _ _ _ _) eqn:Hs; try discriminate.
          eapply (search_none fuel (mp_n mp) (mp_m mp) _ _ _ [t] Hd Hw Hs suf σ ψ); auto.
          -- rewrite <- Hr in Hb0. eapply Hcc; eauto.
          -- simpl. split; [exact Hm | split; assumption].
        * eapply run_start_fail; [exact Hd | | apply below_prefix | exact E |].
          -- apply wfk_prefix; [reflexivity|]. unfold wf_multi in Hw.
             apply andb_true_iff in Hw as [Hw _]. apply andb_true_iff in Hw as [Hw _].
             simpl in Hw. apply andb_true_iff in Hw as [Hw _]. simpl. rewrite Hw. reflexivity.
          -- apply holds_of_fun; auto. constructor; [exact Hm1 | constructor].
        * discriminate.
  Qed.

  (** A match: the nodes are distinct, the first is the visited node, the
      others are nodes of the graph, and the bindings (the variables'
      substitution, sorted, only variables [< mp_n] / [< mp_m]) satisfy the
      declarative relation. *)
  Theorem match_multi_sound : forall fuel N mp t ts bs fbs,
    match_multi fuel N mp t = MMatch ts bs fbs -> msound N mp t ts bs fbs.
  Proof. intros. eapply match_multi_c_sound; [apply up_cands_ok | exact H]. Qed.

  (** No match: no tuple of distinct nodes, the first the visited node and
      the others nodes of the graph, matches under any substitution of the
      variables (the users candidates are complete: [up_cands_complete]). *)
  Theorem match_multi_fail_sound : forall fuel N mp t ps,
    wf_defs D = true -> bodies (mp_roots mp) = Some ps -> wf_multi ps (mp_guard mp) = true ->
    match_multi fuel N mp t = MNoMatch -> mfail N mp t ps.
  Proof. intros. eapply match_multi_c_fail_sound; eauto. apply up_cands_complete. Qed.

  (** Which tuple [match_multi] gives: the first, in the order of
      [ctuples [t] cands] (depth first over the roots, each root's
      candidates in list order: for a root reached by upward traversal, the
      users of its anchor node in increasing order), that matches under
      some substitution of the variables. *)
  Lemma match_multi_c_first : forall fuel mp cands t ps ts bs fbs,
    wf_defs D = true -> bodies (mp_roots mp) = Some ps -> wf_multi ps (mp_guard mp) = true ->
    match_multi_c (root_index D) fuel mp cands t = MMatch ts bs fbs ->
    exists pre post, ctuples [t] cands = pre ++ ts :: post /\
      forall u σ ψ, In u pre ->
        (forall x, mp_n mp <= x -> σ x = None) -> (forall F, mp_m mp <= F -> ψ F = None) ->
        ~ mmatches G D σ ψ ps (mp_guard mp) u.
  Proof.
    intros fuel mp cands t ps ts bs fbs Hd Hb Hw H.
    unfold match_multi_c in H. rewrite Hb in H.
    destruct (mp_roots mp) as [|r1 rs]; [discriminate|].
    destruct ps as [|p1 ps']; [discriminate|].
    destruct (admits _ _ _); [|discriminate].
    destruct (run_prefix _ _ _ _ _); try discriminate.
    destruct (search _ _ _ _ _ _ _) as [ts' Θ1 Φ1| |] eqn:Hs; try discriminate.
    inversion H; subst ts'. eapply search_first; eauto.
  Qed.

  Theorem match_multi_first : forall fuel N mp t ps ts bs fbs,
    wf_defs D = true -> bodies (mp_roots mp) = Some ps -> wf_multi ps (mp_guard mp) = true ->
    match_multi fuel N mp t = MMatch ts bs fbs ->
    exists pre post,
      ctuples [t] (up_cands anchor_depth (users_map N) (root_index D) N mp) = pre ++ ts :: post /\
      forall u σ ψ, In u pre ->
        (forall x, mp_n mp <= x -> σ x = None) -> (forall F, mp_m mp <= F -> ψ F = None) ->
        ~ mmatches G D σ ψ ps (mp_guard mp) u.
  Proof. intros. eapply match_multi_c_first; eauto. Qed.

  Theorem match_multi_idx_sound : forall fuel N mp t ts bs fbs,
    match_multi_idx fuel N mp t = MMatch ts bs fbs -> msound N mp t ts bs fbs.
  Proof. intros. eapply match_multi_c_sound; [apply idx_cands_ok | exact H]. Qed.

  Theorem match_multi_idx_fail_sound : forall fuel N mp t ps,
    wf_defs D = true -> bodies (mp_roots mp) = Some ps -> wf_multi ps (mp_guard mp) = true ->
    match_multi_idx fuel N mp t = MNoMatch -> mfail N mp t ps.
  Proof. intros. eapply match_multi_c_fail_sound; eauto. apply idx_cands_complete. Qed.

  (** ** Every set of nodes, once

      [match_all_multi] enumerates, at each visited node [t] (in increasing
      order) as the first root, *every* tuple the search of [match_multi]
      would try — the same candidates, the same pruning of a prefix with no
      match — not only the first one: a tuple whose set of nodes is already
      reported is skipped before its last run; otherwise the whole
      continuation (the cross-root guard included) is run and, on success,
      the tuple is reported with its first solution. A run out of fuel is
      reported as the visited node's [MOutOfFuel] entry and ends the
      enumeration (it is the last entry). Theorems: every entry is a match
      ([match_all_multi_sound]), no two entries have the same set of nodes
      ([match_all_multi_once]), and, with no entry out of fuel, every set of
      nodes of the graph that matches is an entry's set
      ([match_all_multi_sets]); each set is reported at the smallest node
      that is the first root of a match with that set
      ([match_all_multi_first]). *)

  (** The enumeration's state: the sets reported so far (as the tuples
      reported), the entries in reverse order, and whether a run ran out of
      fuel (then nothing more is run). *)
  Record mstate := mkMstate {
    ms_seen : list (list node); ms_out : list (node * manswer); ms_oof : bool }.

  Definition ms_fuel (t : node) (s : mstate) : mstate :=
    mkMstate (ms_seen s) ((t, MOutOfFuel) :: ms_out s) true.

  (** Every tuple extending [ts] through the candidate functions [rest]
      (the visited node [t] first), depth first in candidate order. *)
  Fixpoint enum (fuel n m : nat) (ps : list pattern) (g : guard) (t : node)
      (ts : list node) (rest : list (list node -> list node)) (s : mstate) : mstate :=
    if ms_oof s then s else
    match rest with
    | [] =>
        if existsb (same_set ts) (ms_seen s) then s else
        match run_full fuel n m ps g ts with
        | OSuccess Θ Φ =>
            mkMstate (ts :: ms_seen s) ((t, MMatch ts (project Θ n) (project Φ m)) :: ms_out s)
              (ms_oof s)
        | OFailure => s
        | OOutOfFuel => ms_fuel t s
        end
    | f :: rest' =>
        fold_left (fun s c =>
          if ms_oof s || memb c ts then s else
          match run_prefix fuel n m (firstn (S (length ts)) ps) (ts ++ [c]) with
          | OSuccess _ _ => enum fuel n m ps g t (ts ++ [c]) rest' s
          | OFailure => s
          | OOutOfFuel => ms_fuel t s
          end) (f ts) s
    end.

  (** The visit of [t]: the index and the first root first (as in
      [match_multi_c]), then the enumeration. *)
  Definition visit (R : rindex) (fuel : nat) (mp : mpat) (cands : list (list node -> list node))
      (s : mstate) (t : node) : mstate :=
    if ms_oof s then s else
    match mp_roots mp, bodies (mp_roots mp) with
    | r1 :: _, Some (p1 :: ps') =>
        if admits G t (ri_find R r1) then
          match run_prefix fuel (mp_n mp) (mp_m mp) [p1] [t] with
          | OSuccess _ _ => enum fuel (mp_n mp) (mp_m mp) (p1 :: ps') (mp_guard mp) t [t] cands s
          | OFailure => s
          | OOutOfFuel => ms_fuel t s
          end
        else s
    | _, _ => s
    end.

  Definition mall (R : rindex) (fuel : nat) (mp : mpat) (cands : list (list node -> list node))
      (nodes : list node) : list (node * manswer) :=
    rev_append (ms_out (fold_left (visit R fuel mp cands) nodes (mkMstate [] [] false))) [].

  (** [mall] reverses with [rev_append] (constant stack, linear time): it is
      [rev] of the entries. *)
  Lemma mall_rev : forall R fuel mp cands nodes,
    mall R fuel mp cands nodes =
    rev (ms_out (fold_left (visit R fuel mp cands) nodes (mkMstate [] [] false))).
  Proof. intros. unfold mall. symmetry. apply rev_alt. Qed.

  (** [pypm_match_all_multi]: the visited nodes [0..N-1] in increasing
      order, the candidate functions built once ([UM]: the users table
      [users_map N], which the library computes once per graph). *)
  Definition match_all_multi_u (UM : VarMap.t (list node)) (fuel N : nat) (mp : mpat)
      : list (node * manswer) :=
    let R := root_index D in mall R fuel mp (up_cands anchor_depth UM R N mp) (seq_tr 0 N).

  Definition match_all_multi (fuel N : nat) (mp : mpat) : list (node * manswer) :=
    match_all_multi_u (users_map N) fuel N mp.

  (** The same with the index's candidates only (benchmark of the
      traversal). *)
  Definition match_all_multi_idx (fuel N : nat) (mp : mpat) : list (node * manswer) :=
    let R := root_index D in mall R fuel mp (idx_cands R N mp) (seq_tr 0 N).

  (** *** Folds *)

  Lemma fold_inv : forall (P : mstate -> Prop) (f : mstate -> node -> mstate) cs s,
    (forall s c, In c cs -> P s -> P (f s c)) -> P s -> P (fold_left f cs s).
  Proof.
    intros P f cs. induction cs as [|c cs IH]; intros s Hf Hs; simpl; [exact Hs|].
    apply IH; [intros; apply Hf; [right|]; assumption | apply Hf; [left; reflexivity | exact Hs]].
  Qed.

  (** [grows s s']: what [s] reported stays reported, fuel once spent stays
      spent. *)
  Definition grows (s s' : mstate) : Prop :=
    (forall x, In x (ms_seen s) -> In x (ms_seen s')) /\ (ms_oof s = true -> ms_oof s' = true).

  Lemma grows_refl : forall s, grows s s.
  Proof. intros s. split; auto. Qed.

  Lemma grows_trans : forall s1 s2 s3, grows s1 s2 -> grows s2 s3 -> grows s1 s3.
  Proof. intros s1 s2 s3 [A B] [C E]. split; auto. Qed.

  Lemma fold_grows : forall (f : mstate -> node -> mstate) cs s,
    (forall s c, grows s (f s c)) -> grows s (fold_left f cs s).
  Proof.
    intros f cs. induction cs as [|c cs IH]; intros s Hf; simpl; [apply grows_refl|].
    eapply grows_trans; [apply Hf | apply IH; exact Hf].
  Qed.

  (** The state just after [c] in a fold over a list holding [c]. *)
  Lemma fold_at : forall (f : mstate -> node -> mstate) cs s c,
    (forall s c, grows s (f s c)) -> In c cs ->
    exists s1, grows s s1 /\ grows (f s1 c) (fold_left f cs s).
  Proof.
    intros f cs s c Hf Hc. apply in_split in Hc as (l1 & l2 & ->).
    rewrite fold_left_app. simpl. exists (fold_left f l1 s).
    split; apply fold_grows; exact Hf.
  Qed.

  Lemma grows_fuel : forall t s, grows s (ms_fuel t s).
  Proof. intros t s. split; simpl; auto. Qed.

  Lemma enum_grows : forall fuel n m ps g t rest ts s,
    grows s (enum fuel n m ps g t ts rest s).
  Proof.
    intros fuel n m ps g t rest. induction rest as [|f rest IH]; intros ts s; simpl;
      destruct (ms_oof s) eqn:Ho; try apply grows_refl.
    - destruct (existsb _ _); [apply grows_refl|].
      destruct (run_full _ _ _ _ _ _); [|apply grows_refl|apply grows_fuel].
      split; simpl; [intros x Hx; right; exact Hx | congruence].
    - apply fold_grows. intros s' c. destruct (ms_oof s' || memb c ts); [apply grows_refl|].
      destruct (run_prefix _ _ _ _ _); [apply IH | apply grows_refl | apply grows_fuel].
  Qed.

  Lemma visit_grows : forall R fuel mp cands s t, grows s (visit R fuel mp cands s t).
  Proof.
    intros R fuel mp cands s t. unfold visit. destruct (ms_oof s); [apply grows_refl|].
    destruct (mp_roots mp) as [|r1 rs]; [apply grows_refl|].
    destruct (bodies (r1 :: rs)) as [[|p1 ps']|]; try apply grows_refl.
    destruct (admits _ _ _); [|apply grows_refl].
    destruct (run_prefix _ _ _ _ _); [apply enum_grows | apply grows_refl | apply grows_fuel].
  Qed.

  (** *** Soundness and "once" *)

  (** The candidate functions give nodes [< N]. *)
  Definition cands_below (N : nat) (cands : list (list node -> list node)) : Prop :=
    forall f, In f cands -> forall ts c, In c (f ts) -> c < N.

  Lemma ucands_below_all : forall ad UM R N rs ps earlier,
    cands_below N (ucands ad UM R N earlier rs ps).
  Proof.
    intros ad UM R N rs. induction rs as [|r rs IH]; intros ps earlier f Hf ts c Hc;
      destruct ps as [|p ps]; simpl in Hf; try contradiction.
    destruct Hf as [<-|Hf]; [eapply cand_fn_below; exact Hc | eapply IH; eassumption].
  Qed.

  Lemma up_cands_below : forall ad UM R N mp, cands_below N (up_cands ad UM R N mp).
  Proof.
    intros ad UM R N mp f Hf. unfold up_cands in Hf.
    destruct (mp_roots mp) as [|r1 rs]; [contradiction|].
    destruct (bodies (r1 :: rs)) as [[|p1 ps]|]; try contradiction.
    eapply ucands_below_all. exact Hf.
  Qed.

  Lemma idx_cands_below : forall R N mp, cands_below N (idx_cands R N mp).
  Proof.
    intros R N mp f Hf ts c Hc. unfold idx_cands, mcands in Hf.
    apply in_map_iff in Hf as (l & <- & Hl). apply in_map_iff in Hl as (r & <- & _).
    rewrite filter_upto_eq in Hc. apply filter_In in Hc as [Hc _]. apply in_seq in Hc. lia.
  Qed.

  (** Two entries with the same set of nodes. *)
  Definition same_entry (e1 e2 : node * manswer) : Prop :=
    exists ts1 bs1 fbs1 ts2 bs2 fbs2,
      snd e1 = MMatch ts1 bs1 fbs1 /\ snd e2 = MMatch ts2 bs2 fbs2 /\
      forall x, In x ts1 <-> In x ts2.

  (** What [mall]'s state holds: every entry is a match of the visited
      node (its set among the reported ones) or a run out of fuel; no two
      entries have the same set; every reported set is an entry's; spent
      fuel is an entry. *)
  Definition inv (N : nat) (mp : mpat) (s : mstate) : Prop :=
    (forall t a, In (t, a) (ms_out s) -> t < N /\
       match a with
       | MMatch ts bs fbs => msound N mp t ts bs fbs /\ In ts (ms_seen s)
       | MNoMatch => False
       | MOutOfFuel => True
       end) /\
    ForallOrdPairs (fun e1 e2 => ~ same_entry e1 e2) (ms_out s) /\
    (forall x, In x (ms_seen s) -> exists t bs fbs, In (t, MMatch x bs fbs) (ms_out s)) /\
    (ms_oof s = true -> exists t, In (t, MOutOfFuel) (ms_out s)).

  Lemma inv_fuel : forall N mp t s, t < N -> inv N mp s -> inv N mp (ms_fuel t s).
  Proof.
    intros N mp t s Ht (H1 & H2 & H3 & H4). unfold ms_fuel. split; [|split; [|split]]; simpl.
    - intros t' a [E|E]; [inversion E; subst; split; auto|apply H1; exact E].
    - constructor; [|exact H2]. apply Forall_forall. intros e _ Hs.
      destruct Hs as (ts1 & b1 & f1 & ts2 & b2 & f2 & E & _). discriminate.
    - intros x Hx. destruct (H3 x Hx) as (t' & bs & fbs & E). exists t', bs, fbs. right. exact E.
    - intros _. exists t. left. reflexivity.
  Qed.

  (** A successful last run of the enumeration is a match. *)
  Lemma leaf_sound : forall fuel N mp ps t ts Θ Φ,
    bodies (mp_roots mp) = Some ps -> length ps = length ts ->
    hd_error ts = Some t -> Forall (fun c => c < N) (tl ts) -> NoDup ts ->
    run_full fuel (mp_n mp) (mp_m mp) ps (mp_guard mp) ts = OSuccess Θ Φ ->
    msound N mp t ts (project Θ (mp_n mp)) (project Φ (mp_m mp)).
  Proof.
    intros fuel N mp ps t ts Θ Φ Hb Hl Ht Hlt Hnd Hrun.
    exists ps. split; [exact Hb|]. split; [exact Ht|]. split; [exact Hlt|].
    destruct (project_props Θ (mp_n mp)) as [Hb1 Hs1].
    destruct (project_props Φ (mp_m mp)) as [Hb2 Hs2].
    split; [|repeat split; assumption].
    unfold run_full in Hrun. apply run_start_success in Hrun.
    apply Forall_push_inv in Hrun as [Hm Hg]; [|exact Hl].
    apply Forall_cons_iff in Hg as [Hg _]. simpl in Hg.
    split; [|split; [|exact Hnd]].
    - eapply matches_list_ext; [| |exact Hm]; intros y; unfold tsub, fsub; simpl;
        rewrite assoc_project; reflexivity.
    - rewrite <- Hg. apply eval_guard_agree; intros y _; unfold tsub, fsub; simpl;
        rewrite assoc_project; reflexivity.
  Qed.

  Lemma hd_snoc : forall (ts : list node) t c, hd_error ts = Some t -> hd_error (ts ++ [c]) = Some t.
  Proof. intros [|a ts] t c H; [discriminate | exact H]. Qed.

  Lemma tl_snoc : forall (ts : list node) t c, hd_error ts = Some t -> tl (ts ++ [c]) = tl ts ++ [c].
  Proof. intros [|a ts] t c H; [discriminate | reflexivity]. Qed.

  Lemma enum_inv : forall fuel N mp ps t rest ts s,
    bodies (mp_roots mp) = Some ps -> cands_below N rest ->
    length ts + length rest = length ps -> hd_error ts = Some t -> t < N ->
    Forall (fun c => c < N) (tl ts) -> NoDup ts -> inv N mp s ->
    inv N mp (enum fuel (mp_n mp) (mp_m mp) ps (mp_guard mp) t ts rest s).
  Proof.
    intros fuel N mp ps t rest. induction rest as [|f rest IH];
      intros ts s Hb Hcb Hl Ht HtN Hlt Hnd Hi; simpl; destruct (ms_oof s) eqn:Ho; try exact Hi.
    - destruct (existsb (same_set ts) (ms_seen s)) eqn:Ex; [exact Hi|].
      destruct (run_full _ _ _ _ _ _) as [Θ Φ| |] eqn:E; [|exact Hi|apply inv_fuel; assumption].
      simpl in Hl. rewrite Nat.add_0_r in Hl.
      assert (Hs := leaf_sound _ _ _ _ _ _ _ _ Hb (eq_sym Hl) Ht Hlt Hnd E).
      destruct Hi as (H1 & H2 & H3 & H4). split; [|split; [|split]]; simpl.
      + intros t' a [Ee|Ee].
        * inversion Ee; subst. split; [exact HtN | split; [exact Hs | left; reflexivity]].
        * destruct (H1 t' a Ee) as [Hlt' Ha]. split; [exact Hlt'|].
          destruct a as [ts' bs fbs| |]; auto. destruct Ha as [Ha Hin]. split; [exact Ha|right; exact Hin].
      + constructor; [|exact H2]. apply Forall_forall. intros [t2 a2] Hin Hsame.
        destruct Hsame as (ts1 & bs1 & fbs1 & ts2 & bs2 & fbs2 & E1 & E2 & Hx).
        simpl in E1, E2. inversion E1; subst ts1 bs1 fbs1. subst a2.
        destruct (H1 _ _ Hin) as [_ [_ Hin2]].
        assert (existsb (same_set ts) (ms_seen s) = true)
          by (apply existsb_exists; exists ts2; split; [exact Hin2 | apply same_set_iff; exact Hx]).
        congruence.
      + intros x [<-|Hx].
        * exists t, (project Θ (mp_n mp)), (project Φ (mp_m mp)). left. reflexivity.
        * destruct (H3 x Hx) as (t' & bs & fbs & E'). exists t', bs, fbs. right. exact E'.
      + intros Ho'. discriminate.
    - apply fold_inv; [|exact Hi]. intros s' c Hc Hi'.
      destruct (ms_oof s' || memb c ts) eqn:Hm; [exact Hi'|].
      apply orb_false_iff in Hm as [_ Hm].
      assert (HcN : c < N) by (eapply Hcb; [left; reflexivity | exact Hc]).
      destruct (run_prefix _ _ _ _ _); [|exact Hi'|apply inv_fuel; assumption].
      apply IH.
      + exact Hb.
      + intros f' Hf'. apply Hcb. right. exact Hf'.
      + rewrite app_length, <- Nat.add_assoc. exact Hl.
      + apply hd_snoc. exact Ht.
      + exact HtN.
      + rewrite (tl_snoc _ _ _ Ht). apply Forall_app. split; [exact Hlt | constructor; auto].
      + apply NoDup_snoc; [exact Hnd|]. intros Hin. apply memb_In in Hin. congruence.
      + exact Hi'.
  Qed.

  Lemma visit_inv : forall R fuel N mp cands s t, t < N -> cands_ok N mp cands ->
    cands_below N cands -> inv N mp s -> inv N mp (visit R fuel mp cands s t).
  Proof.
    intros R fuel N mp cands s t HtN [Hcl _] Hcb Hi. unfold visit. destruct (ms_oof s); [exact Hi|].
    destruct (mp_roots mp) as [|r1 rs] eqn:Hr; [exact Hi|].
    destruct (bodies (r1 :: rs)) as [[|p1 ps']|] eqn:Hb; try exact Hi.
    destruct (admits _ _ _); [|exact Hi].
    destruct (run_prefix _ _ _ _ _); [|exact Hi|apply inv_fuel; assumption].
    rewrite <- Hr in Hb. apply enum_inv; auto.
    - simpl. rewrite (Hcl p1 ps' eq_refl). reflexivity.
    - simpl. constructor.
    - constructor; [intros []|constructor].
  Qed.

  Lemma ForallOrdPairs_snoc : forall A (R : A -> A -> Prop) l a,
    ForallOrdPairs R l -> Forall (fun x => R x a) l -> ForallOrdPairs R (l ++ [a]).
  Proof.
    intros A R l a. induction l as [|x l IH]; intros H Ha; simpl.
    - constructor; constructor.
    - inversion H; subst. inversion Ha; subst. constructor; [|apply IH; assumption].
      apply Forall_app. split; [assumption | constructor; [assumption | constructor]].
  Qed.

  Lemma ForallOrdPairs_rev : forall A (R : A -> A -> Prop) l,
    (forall x y, R x y -> R y x) -> ForallOrdPairs R l -> ForallOrdPairs R (rev l).
  Proof.
    intros A R l Hsym. induction l as [|x l IH]; intros H; simpl; [constructor|].
    inversion H; subst. apply ForallOrdPairs_snoc; [apply IH; assumption|].
    apply Forall_forall. intros y Hy. apply Hsym. rewrite Forall_forall in *.
    apply H2. apply in_rev. exact Hy.
  Qed.

  Lemma mall_inv : forall R fuel N mp cands nodes, cands_ok N mp cands -> cands_below N cands ->
    (forall t, In t nodes -> t < N) ->
    inv N mp (fold_left (visit R fuel mp cands) nodes (mkMstate [] [] false)).
  Proof.
    intros R fuel N mp cands nodes Hok Hcb Hn. apply fold_inv.
    - intros s t Ht Hi. apply visit_inv; auto.
    - split; [|split; [|split]]; simpl; try contradiction; try discriminate. constructor.
  Qed.

  Lemma same_entry_sym : forall e1 e2, ~ same_entry e1 e2 -> ~ same_entry e2 e1.
  Proof.
    intros e1 e2 H (ts1 & b1 & f1 & ts2 & b2 & f2 & E1 & E2 & Hx). apply H.
    exists ts2, b2, f2, ts1, b1, f1. split; [exact E2|]. split; [exact E1|].
    intros x. rewrite Hx. reflexivity.
  Qed.

  Lemma mall_sound : forall R fuel N mp cands nodes t a,
    cands_ok N mp cands -> cands_below N cands -> (forall t, In t nodes -> t < N) ->
    In (t, a) (mall R fuel mp cands nodes) ->
    t < N /\ match a with
             | MMatch ts bs fbs => msound N mp t ts bs fbs
             | MNoMatch => False
             | MOutOfFuel => True
             end.
  Proof.
    intros R fuel N mp cands nodes t a Hok Hcb Hn H. rewrite mall_rev in H. apply in_rev in H.
    destruct (mall_inv R fuel N mp cands nodes Hok Hcb Hn) as (H1 & _).
    destruct (H1 t a H) as [Ht Ha]. split; [exact Ht|]. destruct a; tauto.
  Qed.

  Lemma mall_once : forall R fuel N mp cands nodes,
    cands_ok N mp cands -> cands_below N cands -> (forall t, In t nodes -> t < N) ->
    ForallOrdPairs (fun e1 e2 => ~ same_entry e1 e2) (mall R fuel mp cands nodes).
  Proof.
    intros R fuel N mp cands nodes Hok Hcb Hn. rewrite mall_rev. apply ForallOrdPairs_rev.
    - intros x y. apply same_entry_sym.
    - apply (mall_inv R fuel N mp cands nodes Hok Hcb Hn).
  Qed.

  (** *** Every set *)

  Definition covered (s : mstate) (ts : list node) : Prop :=
    exists x, In x (ms_seen s) /\ forall y, In y ts <-> In y x.

  Lemma covered_grows : forall s s' ts, grows s s' -> covered s ts -> covered s' ts.
  Proof. intros s s' ts [Hg _] (x & Hx & Hy). exists x. split; auto. Qed.

  (** [done s ts]: [ts]'s set is reported, or fuel is spent. *)
  Definition done (s : mstate) (ts : list node) : Prop := ms_oof s = true \/ covered s ts.

  Lemma done_grows : forall s s' ts, grows s s' -> done s ts -> done s' ts.
  Proof.
    intros s s' ts Hg [H|H]; [left; apply (proj2 Hg); exact H | right; eapply covered_grows; eauto].
  Qed.

  Lemma enum_complete : forall fuel n m ps g t rest ts s suf σ ψ,
    wf_defs D = true -> wf_multi ps g = true ->
    incands ts suf rest ->
    (forall x, n <= x -> σ x = None) -> (forall F, m <= F -> ψ F = None) ->
    mmatches G D σ ψ ps g (ts ++ suf) ->
    done (enum fuel n m ps g t ts rest s) (ts ++ suf).
  Proof.
    intros fuel n m ps g t rest. induction rest as [|f rest IH];
      intros ts s suf σ ψ Hd Hw Hs Hσ Hψ Hmm; simpl;
      destruct (ms_oof s) eqn:Ho; try (left; exact Ho).
    - destruct suf; [|contradiction]. rewrite app_nil_r in *.
      destruct (existsb (same_set ts) (ms_seen s)) eqn:Ex.
      + right. apply existsb_exists in Ex as (x & Hx & Hxs). exists x.
        split; [exact Hx | apply same_set_iff; exact Hxs].
      + destruct Hmm as [Hm [Hg Hn]].
        destruct (run_full fuel n m ps g ts) eqn:E.
        * right. exists ts. simpl. split; [left; reflexivity | tauto].
        * exfalso. assert (Hl : length ps = length ts) by (eapply matches_list_length; eauto).
          eapply run_start_fail; [exact Hd | apply wfk_full; eauto | apply below_full | exact E |].
          apply holds_of_fun; auto. constructor; [|constructor]. simpl.
          rewrite <- Hg. apply eval_guard_agree; intros y _; unfold tsub, fsub; simpl;
            apply gsub_ident_of_fun; auto.
        * left. reflexivity.
    - destruct suf as [|c suf']; [contradiction|]. destruct Hs as [Hc Hs'].
      set (step := fun s c =>
          if ms_oof s || memb c ts then s else
          match run_prefix fuel n m (firstn (S (length ts)) ps) (ts ++ [c]) with
          | OSuccess _ _ => enum fuel n m ps g t (ts ++ [c]) rest s
          | OFailure => s
          | OOutOfFuel => ms_fuel t s
          end).
      assert (Hsg : forall s c, grows s (step s c)).
      { intros s0 c0. unfold step. destruct (ms_oof s0 || memb c0 ts); [apply grows_refl|].
        destruct (run_prefix _ _ _ _ _); [apply enum_grows | apply grows_refl | apply grows_fuel]. }
      destruct (fold_at step (f ts) s c Hsg Hc) as (s1 & _ & Hg1).
      apply (done_grows _ _ _ Hg1). unfold step.
      destruct (ms_oof s1) eqn:Ho1; [left; exact Ho1|].
      assert (Hnin : ~ In c ts).
      { destruct Hmm as [_ [_ Hn]]. intros Hin. apply NoDup_remove_2 in Hn. apply Hn.
        apply in_or_app. left. exact Hin. }
      destruct (memb c ts) eqn:Hmb; [apply memb_In in Hmb; contradiction|]. cbn [orb].
      replace (ts ++ c :: suf') with ((ts ++ [c]) ++ suf') in *
        by (rewrite <- app_assoc; reflexivity).
      destruct (run_prefix _ _ _ _ _) eqn:E.
      + apply IH with (σ := σ) (ψ := ψ); auto.
      + exfalso. destruct Hmm as [Hm _]. apply matches_list_prefix in Hm.
        rewrite app_length, Nat.add_comm in Hm. simpl in Hm.
        assert (Hl := matches_list_length _ _ _ _ Hm).
        eapply run_start_fail; [exact Hd | | apply below_prefix | exact E |].
        * apply wfk_prefix; [exact Hl|]. apply forallb_firstn.
          unfold wf_multi in Hw. apply andb_true_iff in Hw as [Hw _].
          apply andb_true_iff in Hw as [Hw _]. exact Hw.
        * apply holds_of_fun; auto.
      + left. reflexivity.
  Qed.

  Lemma visit_complete : forall fuel N mp cands s t suf ps σ ψ,
    cands_complete N mp cands -> wf_defs D = true ->
    bodies (mp_roots mp) = Some ps -> wf_multi ps (mp_guard mp) = true ->
    (forall x, mp_n mp <= x -> σ x = None) -> (forall F, mp_m mp <= F -> ψ F = None) ->
    Forall (fun c => c < N) suf -> mmatches G D σ ψ ps (mp_guard mp) (t :: suf) ->
    done (visit (root_index D) fuel mp cands s t) (t :: suf).
  Proof.
    intros fuel N mp cands s t suf ps σ ψ Hcc Hd Hb Hw Hσ Hψ Hlt Hmm. unfold visit.
    destruct (ms_oof s) eqn:Ho; [left; exact Ho|].
    assert (Hb0 := Hb).
    destruct (mp_roots mp) as [|r1 rs] eqn:Hr.
    - simpl in Hb. inversion Hb; subst. destruct Hmm as [Hm _]. inversion Hm.
    - rewrite Hb. simpl in Hb. destruct (nth_error D r1) as [d1|] eqn:Hd1; [|discriminate].
      destruct (bodies rs) as [ps''|] eqn:Hbs; [|discriminate].
      inversion Hb; subst ps.
      assert (Hmm0 := Hmm). destruct Hmm as [Hm [Hg Hn]].
      inversion Hm as [|σ' ψ' p' ps0 t' ts0 Hm1 Hms]; subst.
      rewrite (root_index_sound G D r1 d1 σ ψ t Hd1 Hm1).
      destruct (run_prefix _ _ _ _ _) eqn:E.
      + change (t :: suf) with ([t] ++ suf).
        apply (enum_complete _ _ _ _ _ _ _ _ _ _ σ ψ Hd Hw); [| exact Hσ | exact Hψ | exact Hmm0].
        rewrite <- Hr in Hb0. eapply Hcc; eauto.
      + exfalso. eapply run_start_fail; [exact Hd | | apply below_prefix | exact E |].
        * apply wfk_prefix; [reflexivity|]. unfold wf_multi in Hw.
          apply andb_true_iff in Hw as [Hw _]. apply andb_true_iff in Hw as [Hw _].
          simpl in Hw. apply andb_true_iff in Hw as [Hw _]. simpl. rewrite Hw. reflexivity.
        * apply holds_of_fun; auto. constructor; [exact Hm1 | constructor].
      + left. reflexivity.
  Qed.

  Lemma mall_sets : forall fuel N mp cands nodes ps ts σ ψ,
    cands_ok N mp cands -> cands_below N cands -> cands_complete N mp cands ->
    (forall t, In t nodes -> t < N) ->
    wf_defs D = true -> bodies (mp_roots mp) = Some ps -> wf_multi ps (mp_guard mp) = true ->
    (forall t, ~ In (t, MOutOfFuel) (mall (root_index D) fuel mp cands nodes)) ->
    (forall x, mp_n mp <= x -> σ x = None) -> (forall F, mp_m mp <= F -> ψ F = None) ->
    (forall c, In c ts -> In c nodes) -> Forall (fun c => c < N) ts -> ts <> [] ->
    mmatches G D σ ψ ps (mp_guard mp) ts ->
    exists t ts' bs fbs, In (t, MMatch ts' bs fbs) (mall (root_index D) fuel mp cands nodes) /\
      forall x, In x ts <-> In x ts'.
  Proof.
    intros fuel N mp cands nodes ps ts σ ψ Hok Hcb Hcc Hn Hd Hb Hw Hoof Hσ Hψ Hin Hlt Hne Hmm.
    destruct ts as [|t suf]; [contradiction|].
    set (R := root_index D). set (sf := fold_left (visit R fuel mp cands) nodes (mkMstate [] [] false)).
    destruct (mall_inv R fuel N mp cands nodes Hok Hcb Hn) as (_ & _ & H3 & H4). fold sf in H3, H4.
    destruct (fold_at (visit R fuel mp cands) nodes (mkMstate [] [] false) t
                (visit_grows R fuel mp cands) (Hin t (or_introl eq_refl))) as (s1 & _ & Hg).
    assert (Hdone : done sf (t :: suf)).
    { apply (done_grows _ _ _ Hg). eapply visit_complete; eauto. inversion Hlt; assumption. }
    destruct Hdone as [Ho|(x & Hx & Hxs)].
    - destruct (H4 Ho) as [t' Ht']. exfalso. apply (Hoof t'). rewrite mall_rev. apply in_rev.
      rewrite rev_involutive. exact Ht'.
    - destruct (H3 x Hx) as (t' & bs & fbs & E). exists t', x, bs, fbs. split; [|exact Hxs].
      rewrite mall_rev. apply in_rev. rewrite rev_involutive. exact E.
  Qed.

  Lemma seq_lt : forall N t, In t (seq 0 N) -> t < N.
  Proof. intros N t H. apply in_seq in H. lia. Qed.

  Lemma seq_tr_lt : forall N t, In t (seq_tr 0 N) -> t < N.
  Proof. intros N t. rewrite seq_tr_eq. apply seq_lt. Qed.

  (** An entry of [match_all_multi] is a match of distinct nodes, the first
      at the entry's node, bindings sorted and only of the shared
      variables — or a run out of fuel (never "no match"). *)
  Theorem match_all_multi_sound : forall fuel N mp t a,
    In (t, a) (match_all_multi fuel N mp) ->
    t < N /\ match a with
             | MMatch ts bs fbs => msound N mp t ts bs fbs
             | MNoMatch => False
             | MOutOfFuel => True
             end.
  Proof.
    intros fuel N mp t a H. eapply mall_sound; [apply up_cands_ok | apply up_cands_below | |exact H].
    apply seq_tr_lt.
  Qed.

  (** Every set once: no two entries of [match_all_multi] have the same
      set of nodes (a symmetric pattern is reported once per set of
      nodes, not once per permutation of its roots). *)
  Theorem match_all_multi_once : forall fuel N mp,
    ForallOrdPairs (fun e1 e2 => ~ same_entry e1 e2) (match_all_multi fuel N mp).
  Proof.
    intros fuel N mp. apply mall_once with (N := N); [apply up_cands_ok | apply up_cands_below | apply seq_tr_lt].
  Qed.

  (** ... and every set: with no entry out of fuel, every tuple of nodes
      of the graph that matches under some substitution of the shared
      variables has its set of nodes among the entries. *)
  Theorem match_all_multi_sets : forall fuel N mp ps ts σ ψ,
    wf_defs D = true -> bodies (mp_roots mp) = Some ps -> wf_multi ps (mp_guard mp) = true ->
    (forall t, ~ In (t, MOutOfFuel) (match_all_multi fuel N mp)) ->
    (forall x, mp_n mp <= x -> σ x = None) -> (forall F, mp_m mp <= F -> ψ F = None) ->
    ts <> [] -> Forall (fun c => c < N) ts ->
    mmatches G D σ ψ ps (mp_guard mp) ts ->
    exists t ts' bs fbs, In (t, MMatch ts' bs fbs) (match_all_multi fuel N mp) /\
      forall x, In x ts <-> In x ts'.
  Proof.
    intros fuel N mp ps ts σ ψ Hd Hb Hw Hoof Hσ Hψ Hne Hlt Hmm.
    eapply mall_sets; eauto using up_cands_ok, up_cands_below, up_cands_complete, seq_tr_lt.
    intros c Hc. rewrite seq_tr_eq. apply in_seq. rewrite Forall_forall in Hlt. specialize (Hlt c Hc). lia.
  Qed.

  (** The index-only candidates: the same three. *)
  Theorem match_all_multi_idx_sound : forall fuel N mp t a,
    In (t, a) (match_all_multi_idx fuel N mp) ->
    t < N /\ match a with
             | MMatch ts bs fbs => msound N mp t ts bs fbs
             | MNoMatch => False
             | MOutOfFuel => True
             end.
  Proof.
    intros fuel N mp t a H. eapply mall_sound; [apply idx_cands_ok | apply idx_cands_below | |exact H].
    apply seq_tr_lt.
  Qed.

  Theorem match_all_multi_idx_once : forall fuel N mp,
    ForallOrdPairs (fun e1 e2 => ~ same_entry e1 e2) (match_all_multi_idx fuel N mp).
  Proof.
    intros fuel N mp. apply mall_once with (N := N); [apply idx_cands_ok | apply idx_cands_below | apply seq_tr_lt].
  Qed.

  Theorem match_all_multi_idx_sets : forall fuel N mp ps ts σ ψ,
    wf_defs D = true -> bodies (mp_roots mp) = Some ps -> wf_multi ps (mp_guard mp) = true ->
    (forall t, ~ In (t, MOutOfFuel) (match_all_multi_idx fuel N mp)) ->
    (forall x, mp_n mp <= x -> σ x = None) -> (forall F, mp_m mp <= F -> ψ F = None) ->
    ts <> [] -> Forall (fun c => c < N) ts ->
    mmatches G D σ ψ ps (mp_guard mp) ts ->
    exists t ts' bs fbs, In (t, MMatch ts' bs fbs) (match_all_multi_idx fuel N mp) /\
      forall x, In x ts <-> In x ts'.
  Proof.
    intros fuel N mp ps ts σ ψ Hd Hb Hw Hoof Hσ Hψ Hne Hlt Hmm.
    eapply mall_sets; eauto using idx_cands_ok, idx_cands_below, idx_cands_complete, seq_tr_lt.
    intros c Hc. rewrite seq_tr_eq. apply in_seq. rewrite Forall_forall in Hlt. specialize (Hlt c Hc). lia.
  Qed.


  (** *** Where each set is reported *)

  (** [step_ok t s s']: the entries of [s] stay, and each new one is of
      the visited node [t]. *)
  Definition step_ok (t : node) (s s' : mstate) : Prop :=
    (forall e, In e (ms_out s) -> In e (ms_out s')) /\
    (forall e, In e (ms_out s') -> In e (ms_out s) \/ fst e = t).

  Lemma step_ok_refl : forall t s, step_ok t s s.
  Proof. intros t s. split; auto. Qed.

  Lemma step_ok_trans : forall t s1 s2 s3, step_ok t s1 s2 -> step_ok t s2 s3 -> step_ok t s1 s3.
  Proof.
    intros t s1 s2 s3 [A B] [C E]. split; [auto|].
    intros e He. destruct (E e He) as [H|H]; [apply B; exact H | right; exact H].
  Qed.

  Lemma step_ok_fuel : forall t s, step_ok t s (ms_fuel t s).
  Proof.
    intros t s. split; simpl; [intros; right; assumption|].
    intros e [<-|He]; [right; reflexivity | left; exact He].
  Qed.

  Lemma fold_step_ok : forall t (f : mstate -> node -> mstate) cs s,
    (forall s c, step_ok t s (f s c)) -> step_ok t s (fold_left f cs s).
  Proof.
    intros t f cs. induction cs as [|c cs IH]; intros s Hf; simpl; [apply step_ok_refl|].
    eapply step_ok_trans; [apply Hf | apply IH; exact Hf].
  Qed.

  Lemma enum_step_ok : forall fuel n m ps g t rest ts s,
    step_ok t s (enum fuel n m ps g t ts rest s).
  Proof.
    intros fuel n m ps g t rest. induction rest as [|f rest IH]; intros ts s; simpl;
      destruct (ms_oof s); try apply step_ok_refl.
    - destruct (existsb _ _); [apply step_ok_refl|].
      destruct (run_full _ _ _ _ _ _); [|apply step_ok_refl|apply step_ok_fuel].
      split; simpl; [intros; right; assumption|].
      intros e [<-|He]; [right; reflexivity | left; exact He].
    - apply fold_step_ok. intros s' c. destruct (ms_oof s' || memb c ts); [apply step_ok_refl|].
      destruct (run_prefix _ _ _ _ _); [apply IH | apply step_ok_refl | apply step_ok_fuel].
  Qed.

  Lemma visit_step_ok : forall R fuel mp cands s t, step_ok t s (visit R fuel mp cands s t).
  Proof.
    intros R fuel mp cands s t. unfold visit. destruct (ms_oof s); [apply step_ok_refl|].
    destruct (mp_roots mp) as [|r1 rs]; [apply step_ok_refl|].
    destruct (bodies (r1 :: rs)) as [[|p1 ps']|]; try apply step_ok_refl.
    destruct (admits _ _ _); [|apply step_ok_refl].
    destruct (run_prefix _ _ _ _ _); [apply enum_step_ok | apply step_ok_refl | apply step_ok_fuel].
  Qed.

  (** Over a list of visits: entries stay, each new one of a visited node. *)
  Lemma fold_visit_nodes : forall R fuel mp cands nodes s,
    (forall e, In e (ms_out s) -> In e (ms_out (fold_left (visit R fuel mp cands) nodes s))) /\
    (forall e, In e (ms_out (fold_left (visit R fuel mp cands) nodes s)) ->
       In e (ms_out s) \/ In (fst e) nodes).
  Proof.
    intros R fuel mp cands nodes. induction nodes as [|t nodes IH]; intros s; simpl.
    - split; auto.
    - destruct (visit_step_ok R fuel mp cands s t) as [A B].
      destruct (IH (visit R fuel mp cands s t)) as [C E]. split; [auto|].
      intros e He. destruct (E e He) as [H|H]; [|right; right; exact H].
      destruct (B e H) as [H'|H']; [left; exact H' | right; left; symmetry; exact H'].
  Qed.

  Lemma fold_visit_oof : forall R fuel mp cands nodes s,
    ms_oof s = true -> fold_left (visit R fuel mp cands) nodes s = s.
  Proof.
    intros R fuel mp cands nodes. induction nodes as [|t nodes IH]; intros s Ho; simpl;
      [reflexivity|].
    unfold visit at 2. rewrite Ho. apply IH. exact Ho.
  Qed.

  Lemma ForallOrdPairs_In : forall A (R : A -> A -> Prop) l a b,
    ForallOrdPairs R l -> In a l -> In b l -> a = b \/ R a b \/ R b a.
  Proof.
    intros A R l. induction l as [|x l IH]; intros a b H Ha Hb; [destruct Ha|].
    inversion H as [|x' l' Hx Hl]; subst. rewrite Forall_forall in Hx.
    destruct Ha as [<-|Ha], Hb as [<-|Hb]; auto.
  Qed.

  Lemma seq_split : forall N t' t, t' < t -> t < N ->
    exists l1 l2, seq 0 N = l1 ++ t' :: l2 /\ (forall x, In x l1 -> x < t') /\ In t l2.
  Proof.
    intros N t' t H1 H2. exists (seq 0 t'), (seq (S t') (N - S t')). split; [|split].
    - replace N with (t' + S (N - S t')) at 1 by lia. rewrite seq_app. reflexivity.
    - intros x Hx. apply in_seq in Hx. lia.
    - apply in_seq. lia.
  Qed.

  (** Each set is reported at the smallest node that is the first root of
      a match with that set: an entry's node is never after the first node
      of a tuple matching its set. *)
  Theorem match_all_multi_first : forall fuel N mp ps t ts bs fbs ts' σ ψ,
    wf_defs D = true -> bodies (mp_roots mp) = Some ps -> wf_multi ps (mp_guard mp) = true ->
    In (t, MMatch ts bs fbs) (match_all_multi fuel N mp) ->
    (forall x, mp_n mp <= x -> σ x = None) -> (forall F, mp_m mp <= F -> ψ F = None) ->
    Forall (fun c => c < N) ts' -> mmatches G D σ ψ ps (mp_guard mp) ts' ->
    (forall x, In x ts <-> In x ts') ->
    forall t', hd_error ts' = Some t' -> t <= t'.
  Proof.
    intros fuel N mp ps t ts bs fbs ts' σ ψ Hd Hb Hw Hin Hσ Hψ Hlt Hmm Hx t' Ht'.
    destruct ts' as [|t0 suf]; [discriminate|]. simpl in Ht'. inversion Ht'; subst t0.
    destruct (Nat.le_gt_cases t t') as [Hle|Hgt]; [exact Hle|exfalso].
    set (R := root_index D) in *. set (UM := users_map N) in *.
    set (cands := up_cands anchor_depth UM R N mp).
    set (s0 := mkMstate [] [] false).
    assert (HtN : t < N) by (apply (match_all_multi_sound fuel N mp t _ Hin)).
    destruct (seq_split N t' t Hgt HtN) as (l1 & l2 & Hseq & Hl1 & Hl2).
    unfold match_all_multi, match_all_multi_u in Hin. rewrite mall_rev in Hin.
    fold R UM cands s0 in Hin. rewrite seq_tr_eq, Hseq, fold_left_app in Hin. simpl in Hin. apply in_rev in Hin.
    set (s1 := fold_left (visit R fuel mp cands) l1 s0) in Hin.
    set (s2 := visit R fuel mp cands s1 t') in Hin.
    (* the entries of s2 are of nodes <= t' *)
    assert (Hs2 : forall e, In e (ms_out s2) -> fst e <= t').
    { intros e He. destruct (visit_step_ok R fuel mp cands s1 t') as [_ B].
      destruct (B e He) as [H|H]; [|lia].
      destruct (proj2 (fold_visit_nodes R fuel mp cands l1 s0) e H) as [H'|H']; [destruct H'|].
      apply Hl1 in H'. lia. }
    assert (Hinv : inv N mp (fold_left (visit R fuel mp cands) l2 s2)).
    { replace (fold_left (visit R fuel mp cands) l2 s2)
        with (fold_left (visit R fuel mp cands) (seq 0 N) s0)
        by (rewrite Hseq, fold_left_app; reflexivity).
      apply mall_inv; [apply up_cands_ok | apply up_cands_below | apply seq_lt]. }
    assert (Hdone : done s2 (t' :: suf)).
    { eapply visit_complete; eauto; [apply up_cands_complete | inversion Hlt; assumption]. }
    destruct Hdone as [Ho|(x & Hxs & Hxx)].
    - rewrite (fold_visit_oof _ _ _ _ _ _ Ho) in Hin. apply Hs2 in Hin. simpl in Hin. lia.
    - assert (Hinv2 : inv N mp s2).
      { unfold s2, s1.
        replace (visit R fuel mp cands (fold_left (visit R fuel mp cands) l1 s0) t')
          with (fold_left (visit R fuel mp cands) (l1 ++ [t']) s0)
          by (rewrite fold_left_app; reflexivity).
        apply mall_inv; [apply up_cands_ok | apply up_cands_below |].
        intros c Hc. apply in_app_or in Hc as [Hc|[<-|[]]]; [apply Hl1 in Hc|]; lia. }
      destruct Hinv2 as (_ & _ & H3 & _).
      destruct (H3 x Hxs) as (t2 & bs2 & fbs2 & E2).
      assert (Ht2 : t2 <= t') by (apply Hs2 in E2; exact E2).
      assert (E2' := proj1 (fold_visit_nodes R fuel mp cands l2 s2) _ E2).
      destruct Hinv as (_ & Hord & _).
      destruct (ForallOrdPairs_In _ _ _ _ _ Hord Hin E2') as [E|[E|E]].
      + inversion E. lia.
      + apply E. exists ts, bs, fbs, x, bs2, fbs2. split; [reflexivity|]. split; [reflexivity|].
        intros y. rewrite Hx. apply Hxx.
      + apply E. exists x, bs2, fbs2, ts, bs, fbs. split; [reflexivity|]. split; [reflexivity|].
        intros y. rewrite Hx. symmetry. apply Hxx.
  Qed.

End Multi.

(** ** Fuel that suffices for a multi-root search

    [match_multi] runs the machine once per candidate prefix
    ([run_prefix] on [match(p1, t1) … match(pᵢ, tᵢ)]) and once per
    complete tuple ([run_full]: all roots, then the cross-root guard), each
    run with the whole [fuel]. [Fuel.cost_sound] bounds the steps of one
    pattern followed by a continuation that takes at most [B] steps;
    chaining it over the roots ([mchain], each root at a node of depth at
    most [dp]) bounds every such run, the guard and the final ST-SUCCESS
    being the last [2] steps. [mstep] takes the [max] with [B] so that the
    chain over a prefix of the roots is at most the chain over all of them.
    So for a descending table ([Fuel.descending]) and a graph where every
    downward path has at most [dp] edges, [multi_fuel_bound D dp ps] never
    runs out ([match_multi_fuel]); with [match_multi_fail_sound], a match
    of distinct nodes, the first at the visited node, gets an answer
    [MMatch] ([match_multi_fuel_complete]). *)

Definition mstep (D : list pdef) (dp : nat) (p : pattern) (B : nat) : nat :=
  max B (fst (Fuel.cost D dp (Fuel.LMAX D) p) + snd (Fuel.cost D dp (Fuel.LMAX D) p) * B).

Definition mchain (D : list pdef) (dp : nat) (ps : list pattern) (B : nat) : nat :=
  fold_right (mstep D dp) B ps.

(** The fuel for the roots' bodies [ps] on a graph of depth at most [dp]. *)
Definition multi_fuel_bound (D : list pdef) (dp : nat) (ps : list pattern) : nat :=
  mchain D dp ps 2.

Lemma mchain_ge : forall D dp ps B, B <= mchain D dp ps B.
Proof.
  intros D dp ps B. induction ps as [|p ps IH]; simpl; [lia|].
  unfold mstep at 1. lia.
Qed.

Lemma mchain_mono : forall D dp ps B1 B2, B1 <= B2 -> mchain D dp ps B1 <= mchain D dp ps B2.
Proof.
  intros D dp ps B1 B2 H. induction ps as [|p ps IH]; simpl; [exact H|].
  unfold mstep. apply Nat.max_le_compat; [exact IH|].
  apply Nat.add_le_mono_l, Nat.mul_le_mono_l, IH.
Qed.

Lemma mchain_firstn : forall D dp j ps B, mchain D dp (firstn j ps) B <= mchain D dp ps B.
Proof.
  intros D dp j. induction j as [|j IH]; intros ps B; simpl; [apply mchain_ge|].
  destruct ps as [|p ps]; simpl; [lia|].
  unfold mstep. apply Nat.max_le_compat; [apply IH|].
  apply Nat.add_le_mono_l, Nat.mul_le_mono_l, IH.
Qed.

Section MultiFuel.
  Variable G : graph.
  Variable D : list pdef.
  Variable HD : wf_defs D = true.
  Variable Hdesc : Fuel.descending D = true.
  Variable dp : nat.
  Variable Hdepth : forall t, Fuel.depth_le G dp t.

  (** What [Fuel.cost_sound] needs of a root's body. *)
  Definition fuel_ok (p : pattern) : Prop :=
    Fuel.ug D (Fuel.LMAX D) p = true /\ Fuel.args_ok D p = true /\ wfb D p = true.

  Lemma bodies_fuel_ok : forall rs ps, bodies D rs = Some ps -> Forall fuel_ok ps.
  Proof.
    induction rs as [|r rs IH]; intros ps H; simpl in H; [inversion H; constructor|].
    destruct (nth_error D r) as [d|] eqn:Hd; [|discriminate].
    destruct (bodies D rs) as [ps'|] eqn:E; [|discriminate]. inversion H; subst.
    constructor; [|apply IH; reflexivity].
    destruct (Fuel.desc_body D Hdesc r d Hd) as [Hug Hargs].
    destruct (wf_defs_body D HD r d Hd) as (Hwf & _ & _). repeat split; assumption.
  Qed.

  (** The matches of [ps] at [ts], then a continuation [k] that gives up
      or succeeds within [B] steps: within [mchain D dp ps B] steps. *)
  Lemma push_reach : forall ps ts ρ k B Θ Φ nf stk,
    Forall fuel_ok ps ->
    (forall Θ' Φ' nf' stk', Fuel.reach G D B stk' (Running Θ' Φ' nf' stk' k)) ->
    Fuel.reach G D (mchain D dp ps B) stk (Running Θ Φ nf stk (push_matches ps ts ρ k)).
  Proof.
    induction ps as [|p ps IH]; intros ts ρ k B Θ Φ nf stk Hok Hk.
    - simpl. apply Hk.
    - inversion Hok as [|p' ps' [Hug [Hargs Hwf]] Hok']; subst.
      destruct ts as [|t ts].
      + simpl. eapply Fuel.reach_mono; [|apply Hk].
        apply (mchain_ge D dp (p :: ps)).
      + simpl. eapply Fuel.reach_mono; [apply Nat.le_max_r|].
        apply (Fuel.cost_sound G D HD Hdesc dp (Fuel.LMAX D) p Hug Hargs Hwf t ρ); [apply Hdepth|].
        intros Θ' Φ' nf' stk' _ _. apply IH; assumption.
  Qed.

  Lemma reach_run : forall B st fuel,
    Fuel.reach G D B [] st -> B <= fuel -> run G D fuel st <> OOutOfFuel.
  Proof.
    intros B st fuel (j & Hj & [HS|(nf & HF)]) Hle.
    - apply (Fuel.exec_run G D j); [lia | left; exact HS].
    - apply (Fuel.exec_run G D j); [lia | right; exact HF].
  Qed.

  Lemma end_reach : forall Θ' Φ' nf' stk', Fuel.reach G D 2 stk' (Running Θ' Φ' nf' stk' []).
  Proof. intros. exists 1. split; [lia|]. left. simpl. eauto. Qed.

  Lemma guard_reach : forall g ρ Θ' Φ' nf' stk',
    Fuel.reach G D 2 stk' (Running Θ' Φ' nf' stk' [AGuard g ρ]).
  Proof.
    intros. cbv delta [Fuel.reach]. simpl.
    destruct (eval_guard G (tsub Θ' ρ) (fsub Φ' ρ) g) as [[|]|] eqn:E.
    - exists 2. split; [lia|]. left. simpl. rewrite E. simpl. eauto.
    - exists 1. split; [lia|]. right. exists nf'. simpl. rewrite E. reflexivity.
    - exists 1. split; [lia|]. right. exists nf'. simpl. rewrite E. reflexivity.
  Qed.

  Variable fuel : nat.
  Variables n m : nat.
  Variable ps : list pattern.
  Variable Hok : Forall fuel_ok ps.
  Variable Hle : multi_fuel_bound D dp ps <= fuel.

  Lemma run_prefix_fuel : forall j ts, run_prefix G D fuel n m (firstn j ps) ts <> OOutOfFuel.
  Proof.
    intros j ts. unfold run_prefix, mstart. eapply reach_run; [apply push_reach|].
    - rewrite <- (firstn_skipn j ps) in Hok. apply Forall_app in Hok as [H _]. exact H.
    - apply end_reach.
    - eapply Nat.le_trans; [apply mchain_firstn | exact Hle].
  Qed.

  Lemma run_full_fuel : forall g ts, run_full G D fuel n m ps g ts <> OOutOfFuel.
  Proof.
    intros g ts. unfold run_full, mstart. eapply reach_run; [apply push_reach|].
    - exact Hok.
    - apply guard_reach.
    - exact Hle.
  Qed.

  Lemma first_of_out : forall f cs,
    (forall c, In c cs -> f c <> MOut) -> first_of f cs <> MOut.
  Proof.
    intros f cs. induction cs as [|c cs IH]; intros H; simpl; [discriminate|].
    specialize (H c (or_introl eq_refl)) as Hc. destruct (f c); try discriminate.
    - apply IH. intros c' Hc'. apply H. right. exact Hc'.
    - contradiction.
  Qed.

  Lemma search_fuel : forall g rest ts, search G D fuel n m ps g ts rest <> MOut.
  Proof.
    intros g rest. induction rest as [|f rest IH]; intros ts; cbn [search].
    - pose proof (run_full_fuel g ts) as H. destruct (run_full _ _ _ _ _ _ _ _); congruence.
    - apply first_of_out. intros c _. destruct (memb c ts); [discriminate|].
      pose proof (run_prefix_fuel (S (length ts)) (ts ++ [c])) as H.
      destruct (run_prefix _ _ _ _ _ _ _); [apply IH | discriminate | congruence].
  Qed.

  (** No run out of fuel, no entry out of fuel. *)
  Definition no_oof (s : mstate) : Prop :=
    ms_oof s = false /\ forall t, ~ In (t, MOutOfFuel) (ms_out s).

  Lemma enum_fuel : forall g t rest ts s, no_oof s -> no_oof (enum G D fuel n m ps g t ts rest s).
  Proof.
    intros g t rest. induction rest as [|f rest IH]; intros ts s Hs; cbn [enum];
      rewrite (proj1 Hs).
    - destruct (existsb _ _); [exact Hs|].
      pose proof (run_full_fuel g ts) as H. destruct (run_full _ _ _ _ _ _ _ _); [|exact Hs|congruence].
      split; [reflexivity|]. intros t' [E|E]; [discriminate | exact (proj2 Hs t' E)].
    - apply fold_inv; [|exact Hs]. intros s' c _ Hs'. rewrite (proj1 Hs'). simpl.
      destruct (memb c ts); [exact Hs'|].
      pose proof (run_prefix_fuel (S (length ts)) (ts ++ [c])) as H.
      destruct (run_prefix _ _ _ _ _ _ _); [apply IH; exact Hs' | exact Hs' | congruence].
  Qed.
End MultiFuel.

(** With [multi_fuel_bound] of the roots' bodies, a descending table and a
    graph of depth at most [dp], the multi-root search never answers out of
    fuel, whatever its candidate functions. *)
Theorem match_multi_c_fuel : forall G D dp fuel R mp cands t ps,
  wf_defs D = true -> Fuel.descending D = true -> (forall t, Fuel.depth_le G dp t) ->
  bodies D (mp_roots mp) = Some ps -> multi_fuel_bound D dp ps <= fuel ->
  match_multi_c G D R fuel mp cands t <> MOutOfFuel.
Proof.
  intros G D dp fuel R mp cands t ps HD Hdesc Hdepth Hb Hle. unfold match_multi_c.
  pose proof (bodies_fuel_ok D HD Hdesc _ _ Hb) as Hok. rewrite Hb.
  destruct (mp_roots mp) as [|r1 rs]; [discriminate|].
  destruct ps as [|p1 ps']; [discriminate|].
  destruct (admits _ _ _); [|discriminate].
  pose proof (run_prefix_fuel G D HD Hdesc dp Hdepth fuel (mp_n mp) (mp_m mp) (p1 :: ps') Hok Hle 1 [t])
    as Hp. simpl in Hp.
  destruct (run_prefix _ _ _ _ _ _ _); [|discriminate|congruence].
  pose proof (search_fuel G D HD Hdesc dp Hdepth fuel (mp_n mp) (mp_m mp) (p1 :: ps') Hok Hle
                (mp_guard mp) cands [t]) as Hs.
  destruct (search _ _ _ _ _ _ _ _ _); congruence.
Qed.

Theorem match_multi_fuel : forall G D dp fuel N mp t ps,
  wf_defs D = true -> Fuel.descending D = true -> (forall t, Fuel.depth_le G dp t) ->
  bodies D (mp_roots mp) = Some ps -> multi_fuel_bound D dp ps <= fuel ->
  match_multi G D fuel N mp t <> MOutOfFuel.
Proof. intros. eapply match_multi_c_fuel; eauto. Qed.

(** Completeness for descending tables: when some tuple of distinct nodes,
    the first the visited node [t] and the others nodes of the graph,
    matches (under a substitution of the shared variables),
    [match_multi] with [multi_fuel_bound] finds a match, neither
    [MNoMatch] ([match_multi_fail_sound]) nor [MOutOfFuel]
    ([match_multi_fuel]). *)
Corollary match_multi_fuel_complete : forall G D dp fuel N mp t ps ts σ ψ,
  wf_defs D = true -> Fuel.descending D = true -> (forall t, Fuel.depth_le G dp t) ->
  bodies D (mp_roots mp) = Some ps -> wf_multi D ps (mp_guard mp) = true ->
  multi_fuel_bound D dp ps <= fuel ->
  hd_error ts = Some t -> Forall (fun c => c < N) (tl ts) ->
  (forall x, mp_n mp <= x -> σ x = None) -> (forall F, mp_m mp <= F -> ψ F = None) ->
  mmatches G D σ ψ ps (mp_guard mp) ts ->
  exists ts' bs fbs, match_multi G D fuel N mp t = MMatch ts' bs fbs.
Proof.
  intros G D dp fuel N mp t ps ts σ ψ HD Hdesc Hdepth Hb Hw Hle Ht Hlt Hσ Hψ Hm.
  destruct (match_multi G D fuel N mp t) as [ts' bs fbs| |] eqn:E.
  - eauto.
  - exfalso. exact (match_multi_fail_sound G D fuel N mp t ps HD Hb Hw E ts σ ψ Ht Hlt Hσ Hψ Hm).
  - exfalso. exact (match_multi_fuel G D dp fuel N mp t ps HD Hdesc Hdepth Hb Hle E).
Qed.

(** [match_all_multi] with [multi_fuel_bound]: no entry is out of fuel, so
    every set of nodes of the graph that matches is an entry's set
    ([match_all_multi_sets] without its premise on fuel). *)
Theorem match_all_multi_fuel : forall G D dp fuel N mp ps,
  wf_defs D = true -> Fuel.descending D = true -> (forall t, Fuel.depth_le G dp t) ->
  bodies D (mp_roots mp) = Some ps -> multi_fuel_bound D dp ps <= fuel ->
  forall t, ~ In (t, MOutOfFuel) (match_all_multi G D fuel N mp).
Proof.
  intros G D dp fuel N mp ps HD Hdesc Hdepth Hb Hle.
  pose proof (bodies_fuel_ok D HD Hdesc _ _ Hb) as Hok.
  assert (H : no_oof (fold_left (visit G D (root_index D) fuel mp
                        (up_cands G D anchor_depth (users_map G N) (root_index D) N mp))
                        (seq_tr 0 N) (mkMstate [] [] false))).
  { apply fold_inv; [|split; [reflexivity | intros t []]].
    intros s c _ Hs. unfold visit. rewrite (proj1 Hs), Hb.
    destruct (mp_roots mp) as [|r1 rs]; [exact Hs|].
    destruct ps as [|p1 ps']; [exact Hs|].
    destruct (admits _ _ _); [|exact Hs].
    pose proof (run_prefix_fuel G D HD Hdesc dp Hdepth fuel (mp_n mp) (mp_m mp) (p1 :: ps') Hok Hle
                  1 [c]) as Hp. simpl in Hp.
    destruct (run_prefix _ _ _ _ _ _ _); [|exact Hs|congruence].
    eapply enum_fuel with (dp := dp); eassumption. }
  intros t Ht. unfold match_all_multi, match_all_multi_u in Ht. rewrite mall_rev in Ht.
  apply in_rev in Ht. exact (proj2 H t Ht).
Qed.

Corollary match_all_multi_fuel_sets : forall G D dp fuel N mp ps ts σ ψ,
  wf_defs D = true -> Fuel.descending D = true -> (forall t, Fuel.depth_le G dp t) ->
  bodies D (mp_roots mp) = Some ps -> wf_multi D ps (mp_guard mp) = true ->
  multi_fuel_bound D dp ps <= fuel ->
  (forall x, mp_n mp <= x -> σ x = None) -> (forall F, mp_m mp <= F -> ψ F = None) ->
  ts <> [] -> Forall (fun c => c < N) ts ->
  mmatches G D σ ψ ps (mp_guard mp) ts ->
  exists t ts' bs fbs, In (t, MMatch ts' bs fbs) (match_all_multi G D fuel N mp) /\
    forall x, In x ts <-> In x ts'.
Proof.
  intros G D dp fuel N mp ps ts σ ψ HD Hdesc Hdepth Hb Hw Hle Hσ Hψ Hne Hlt Hm.
  eapply match_all_multi_sets; eauto.
  exact (match_all_multi_fuel G D dp fuel N mp ps HD Hdesc Hdepth Hb Hle).
Qed.

(** ** Scope of a multi-root pattern: any substitution

    The roots' bodies read the shared variables as their parameters
    ([wf_defs] checks each body's scope against its definition's
    parameters, [Syntax.scoped_def]). [mp_scoped] checks that every root's
    definition has at most [mp_n] term and [mp_m] operator parameters, so
    every variable a root reads is a shared one; the library checks it
    after [wf_multi] (the decoder rejects a spec that fails it). Then a match under any substitution is one under its
    restriction to the shared variables ([mmatches_scope]), and the
    theorems above hold for every substitution, not only those binding the
    shared variables alone (the [_any] forms). *)

Definition mp_scoped (D : list pdef) (mp : mpat) : bool :=
  forallb (fun r => match nth_error D r with
                    | Some d => Nat.leb (nparams d) (mp_n mp) && Nat.leb (nfparams d) (mp_m mp)
                    | None => false
                    end) (mp_roots mp).

Lemma bodies_scoped : forall D mp ps,
  bodies D (mp_roots mp) = Some ps -> mp_scoped D mp = true ->
  Forall (fun p => exists P d, nth_error D P = Some d /\ body d = p /\
                     nparams d <= mp_n mp /\ nfparams d <= mp_m mp) ps.
Proof.
  intros D mp ps Hb Hs. unfold mp_scoped in Hs. revert ps Hb Hs.
  generalize (mp_roots mp) as rs. induction rs as [|r rs IH]; intros ps Hb Hs; simpl in *.
  - inversion Hb. constructor.
  - destruct (nth_error D r) as [d|] eqn:Hd; [|discriminate].
    destruct (bodies D rs) as [ps'|] eqn:Hbs; [|discriminate].
    inversion Hb; subst ps. apply andb_true_iff in Hs as [Hs1 Hs2].
    apply andb_true_iff in Hs1 as [Hn Hm]. apply Nat.leb_le in Hn, Hm.
    constructor; [exists r, d; auto | apply IH; auto].
Qed.

Lemma matches_list_In : forall G D σ ψ ps ts p,
  matches_list G D σ ψ ps ts -> In p ps -> exists t, matches G D σ ψ p t.
Proof.
  intros G D σ ψ ps ts p H. induction H as [|σ' ψ' q qs t ts Hq Hqs IH]; intros Hp; [destruct Hp|].
  destruct Hp as [<-|Hp]; eauto.
Qed.

(** A match under any substitution is one under its restriction to the
    shared variables [0..mp_n-1] / [0..mp_m-1]. *)
Lemma mmatches_scope : forall G D mp ps σ ψ ts,
  wf_defs D = true -> bodies D (mp_roots mp) = Some ps -> wf_multi D ps (mp_guard mp) = true ->
  mp_scoped D mp = true ->
  mmatches G D σ ψ ps (mp_guard mp) ts ->
  mmatches G D (restrict (fun x => Nat.ltb x (mp_n mp)) σ)
               (restrict (fun F => Nat.ltb F (mp_m mp)) ψ) ps (mp_guard mp) ts.
Proof.
  intros G D mp ps σ ψ ts HD Hb Hw Hs [Hm [Hg Hn]].
  set (σ' := restrict (fun x => Nat.ltb x (mp_n mp)) σ).
  set (ψ' := restrict (fun F => Nat.ltb F (mp_m mp)) ψ).
  pose proof (bodies_scoped D mp ps Hb Hs) as Hps. rewrite Forall_forall in Hps.
  (* each root matches under the restriction and binds shared variables only *)
  assert (Hr : forall p t, In p ps -> matches G D σ ψ p t ->
            matches G D σ' ψ' p t /\
            (forall x, In x (binds D p) -> x < mp_n mp) /\
            (forall F, In F (fbinds D p) -> F < mp_m mp)).
  { intros p t Hp Hpt. destruct (Hps p Hp) as (P & d & HP & <- & Hn1 & Hm1).
    pose proof (matches_params G D HD P d σ ψ t HP Hpt) as Hr.
    destruct (matches_binds G D HD _ _ _ _ Hr) as [B1 B2].
    split; [|split].
    - eapply match_weakening; [exact Hr| |]; intros y v; subst σ' ψ'; unfold restrict;
        destruct (Nat.ltb y _) eqn:E; try discriminate; apply Nat.ltb_lt in E;
        (replace (Nat.ltb y _) with true by (symmetry; apply Nat.ltb_lt; lia)); auto.
    - intros x Hx. specialize (B1 x Hx). unfold restrict in B1.
      destruct (Nat.ltb x (nparams d)) eqn:E; [apply Nat.ltb_lt in E; lia | congruence].
    - intros F HF. specialize (B2 F HF). unfold restrict in B2.
      destruct (Nat.ltb F (nfparams d)) eqn:E; [apply Nat.ltb_lt in E; lia | congruence]. }
  unfold wf_multi in Hw. apply andb_true_iff in Hw as [Hw HF]. apply andb_true_iff in Hw as [_ HV].
  split; [|split; [|exact Hn]].
  - assert (Hall : Forall (fun p => forall t, matches G D σ ψ p t -> matches G D σ' ψ' p t) ps).
    { apply Forall_forall. intros p Hp t Hpt. exact (proj1 (Hr p t Hp Hpt)). }
    clear - Hm Hall. induction Hm; inversion Hall; subst; constructor; auto.
  - rewrite <- Hg. apply eval_guard_agree; subst σ' ψ'; intros y Hy; unfold restrict.
    + apply (subset_In _ _ HV), in_flat_map in Hy as (p & Hp & Hy).
      destruct (matches_list_In G D σ ψ ps ts p Hm Hp) as [t Ht].
      pose proof (proj1 (proj2 (Hr p t Hp Ht)) y Hy) as Hlt.
      apply Nat.ltb_lt in Hlt. rewrite Hlt. reflexivity.
    + apply (subset_In _ _ HF), in_flat_map in Hy as (p & Hp & Hy).
      destruct (matches_list_In G D σ ψ ps ts p Hm Hp) as [t Ht].
      pose proof (proj2 (proj2 (Hr p t Hp Ht)) y Hy) as Hlt.
      apply Nat.ltb_lt in Hlt. rewrite Hlt. reflexivity.
Qed.

(** The restrictions bind the shared variables only. *)
Lemma restrict_shared : forall A (σ : nat -> option A) n,
  forall x, n <= x -> restrict (fun y => Nat.ltb y n) σ x = None.
Proof. intros A σ n x H. apply restrict_below. exact H. Qed.

(** "No match", under any substitution. *)
Theorem match_multi_fail_sound_any : forall G D fuel N mp t ps,
  wf_defs D = true -> bodies D (mp_roots mp) = Some ps -> wf_multi D ps (mp_guard mp) = true ->
  mp_scoped D mp = true ->
  match_multi G D fuel N mp t = MNoMatch ->
  forall ts σ ψ, hd_error ts = Some t -> Forall (fun c => c < N) (tl ts) ->
    ~ mmatches G D σ ψ ps (mp_guard mp) ts.
Proof.
  intros G D fuel N mp t ps HD Hb Hw Hs H ts σ ψ Ht Hlt Hm.
  exact (match_multi_fail_sound G D fuel N mp t ps HD Hb Hw H ts _ _ Ht Hlt
           (restrict_shared _ σ _) (restrict_shared _ ψ _) (mmatches_scope G D mp ps σ ψ ts HD Hb Hw Hs Hm)).
Qed.

Theorem match_multi_idx_fail_sound_any : forall G D fuel N mp t ps,
  wf_defs D = true -> bodies D (mp_roots mp) = Some ps -> wf_multi D ps (mp_guard mp) = true ->
  mp_scoped D mp = true ->
  match_multi_idx G D fuel N mp t = MNoMatch ->
  forall ts σ ψ, hd_error ts = Some t -> Forall (fun c => c < N) (tl ts) ->
    ~ mmatches G D σ ψ ps (mp_guard mp) ts.
Proof.
  intros G D fuel N mp t ps HD Hb Hw Hs H ts σ ψ Ht Hlt Hm.
  exact (match_multi_idx_fail_sound G D fuel N mp t ps HD Hb Hw H ts _ _ Ht Hlt
           (restrict_shared _ σ _) (restrict_shared _ ψ _) (mmatches_scope G D mp ps σ ψ ts HD Hb Hw Hs Hm)).
Qed.

(** Which tuple: no tuple before it in the search order matches, under any
    substitution. *)
Theorem match_multi_first_any : forall G D fuel N mp t ps ts bs fbs,
  wf_defs D = true -> bodies D (mp_roots mp) = Some ps -> wf_multi D ps (mp_guard mp) = true ->
  mp_scoped D mp = true ->
  match_multi G D fuel N mp t = MMatch ts bs fbs ->
  exists pre post,
    ctuples [t] (up_cands G D anchor_depth (users_map G N) (root_index D) N mp) = pre ++ ts :: post /\
    forall u σ ψ, In u pre -> ~ mmatches G D σ ψ ps (mp_guard mp) u.
Proof.
  intros G D fuel N mp t ps ts bs fbs HD Hb Hw Hs H.
  destruct (match_multi_first G D fuel N mp t ps ts bs fbs HD Hb Hw H) as (pre & post & Heq & Hno).
  exists pre, post. split; [exact Heq|]. intros u σ ψ Hu Hm.
  exact (Hno u _ _ Hu (restrict_shared _ σ _) (restrict_shared _ ψ _)
           (mmatches_scope G D mp ps σ ψ u HD Hb Hw Hs Hm)).
Qed.

(** Every set, under any substitution. *)
Theorem match_all_multi_sets_any : forall G D fuel N mp ps ts σ ψ,
  wf_defs D = true -> bodies D (mp_roots mp) = Some ps -> wf_multi D ps (mp_guard mp) = true ->
  mp_scoped D mp = true ->
  (forall t, ~ In (t, MOutOfFuel) (match_all_multi G D fuel N mp)) ->
  ts <> [] -> Forall (fun c => c < N) ts ->
  mmatches G D σ ψ ps (mp_guard mp) ts ->
  exists t ts' bs fbs, In (t, MMatch ts' bs fbs) (match_all_multi G D fuel N mp) /\
    forall x, In x ts <-> In x ts'.
Proof.
  intros G D fuel N mp ps ts σ ψ HD Hb Hw Hs Hoof Hne Hlt Hm.
  exact (match_all_multi_sets G D fuel N mp ps ts _ _ HD Hb Hw Hoof
           (restrict_shared _ σ _) (restrict_shared _ ψ _) Hne Hlt
           (mmatches_scope G D mp ps σ ψ ts HD Hb Hw Hs Hm)).
Qed.

Theorem match_all_multi_first_any : forall G D fuel N mp ps t ts bs fbs ts' σ ψ,
  wf_defs D = true -> bodies D (mp_roots mp) = Some ps -> wf_multi D ps (mp_guard mp) = true ->
  mp_scoped D mp = true ->
  In (t, MMatch ts bs fbs) (match_all_multi G D fuel N mp) ->
  Forall (fun c => c < N) ts' -> mmatches G D σ ψ ps (mp_guard mp) ts' ->
  (forall x, In x ts <-> In x ts') ->
  forall t', hd_error ts' = Some t' -> t <= t'.
Proof.
  intros G D fuel N mp ps t ts bs fbs ts' σ ψ HD Hb Hw Hs Hin Hlt Hm.
  exact (match_all_multi_first G D fuel N mp ps t ts bs fbs ts' _ _ HD Hb Hw Hin
           (restrict_shared _ σ _) (restrict_shared _ ψ _) Hlt
           (mmatches_scope G D mp ps σ ψ ts' HD Hb Hw Hs Hm)).
Qed.

(** Completeness with [multi_fuel_bound], under any substitution. *)
Corollary match_multi_fuel_complete_any : forall G D dp fuel N mp t ps ts σ ψ,
  wf_defs D = true -> Fuel.descending D = true -> (forall t, Fuel.depth_le G dp t) ->
  bodies D (mp_roots mp) = Some ps -> wf_multi D ps (mp_guard mp) = true ->
  mp_scoped D mp = true ->
  multi_fuel_bound D dp ps <= fuel ->
  hd_error ts = Some t -> Forall (fun c => c < N) (tl ts) ->
  mmatches G D σ ψ ps (mp_guard mp) ts ->
  exists ts' bs fbs, match_multi G D fuel N mp t = MMatch ts' bs fbs.
Proof.
  intros G D dp fuel N mp t ps ts σ ψ HD Hdesc Hdepth Hb Hw Hs Hle Ht Hlt Hm.
  exact (match_multi_fuel_complete G D dp fuel N mp t ps ts _ _ HD Hdesc Hdepth Hb Hw Hle Ht Hlt
           (restrict_shared _ σ _) (restrict_shared _ ψ _)
           (mmatches_scope G D mp ps σ ψ ts HD Hb Hw Hs Hm)).
Qed.

Corollary match_all_multi_fuel_sets_any : forall G D dp fuel N mp ps ts σ ψ,
  wf_defs D = true -> Fuel.descending D = true -> (forall t, Fuel.depth_le G dp t) ->
  bodies D (mp_roots mp) = Some ps -> wf_multi D ps (mp_guard mp) = true ->
  mp_scoped D mp = true ->
  multi_fuel_bound D dp ps <= fuel ->
  ts <> [] -> Forall (fun c => c < N) ts ->
  mmatches G D σ ψ ps (mp_guard mp) ts ->
  exists t ts' bs fbs, In (t, MMatch ts' bs fbs) (match_all_multi G D fuel N mp) /\
    forall x, In x ts <-> In x ts'.
Proof.
  intros G D dp fuel N mp ps ts σ ψ HD Hdesc Hdepth Hb Hw Hs Hle Hne Hlt Hm.
  exact (match_all_multi_fuel_sets G D dp fuel N mp ps ts _ _ HD Hdesc Hdepth Hb Hw Hle
           (restrict_shared _ σ _) (restrict_shared _ ψ _) Hne Hlt
           (mmatches_scope G D mp ps σ ψ ts HD Hb Hw Hs Hm)).
Qed.
