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
    [t1], the node being visited, and finds the others among finite
    candidate lists, one per later root: the nodes [0..N-1] whose operator
    the root-operator index of that root admits ([mcands]; a node outside
    it cannot match, [RootIndex.root_index_sound]). It is a depth-first
    search, a choice point backtracked like an alternate: for root [i] it
    tries each candidate not already used, runs the machine of
    [Interpreter.v] on the prefix [match(p1, t1) … match(pᵢ, c)] (one
    continuation, one substitution shared by all roots: the single-root
    machine started with the earlier roots' bindings), prunes the
    candidate when that prefix has no match (failure soundness), and
    otherwise goes on to root [i+1]; at the end the whole continuation,
    the cross-root guard included, is run. So the soundness of the
    single-root machine is reused as it is: success and failure soundness
    of a continuation ([run_start_success], [run_start_fail]).

    Theorems: [match_multi_sound] (an answer is a declarative match of
    distinct nodes, the first at the visited node), [match_multi_fail_sound]
    ("no match": no tuple of distinct nodes with the first at the visited
    node matches, under any substitution of the variables), and for
    [match_all_multi] "every match once": each set of nodes is reported at
    most once, not once per permutation ([match_all_multi_once]), and
    every node's match is reported or is a permutation of one reported at
    an earlier node ([match_all_multi_complete]). [mmatches_one]: with one
    root and the guard [true], [mmatches] is the single-root relation (the
    single-root theorems are the one-root case). [mmatches_perm]: the
    relation does not depend on the order of the roots (any root order
    finds the same sets of nodes). *)

From Coq Require Import List Bool Arith Lia Sorted Permutation.
From PyPM Require Import Syntax Subst Declarative Env Algorithmic Interpreter Soundness
  RootIndex Entry.
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

  (** [ts]: the nodes chosen for the first roots; [rest]: the candidate
      lists of the others. *)
  Fixpoint search (fuel n m : nat) (ps : list pattern) (g : guard) (ts : list node)
      (rest : list (list node)) : mres :=
    match rest with
    | [] =>
        match run_full fuel n m ps g ts with
        | OSuccess Θ Φ => MFound ts Θ Φ
        | OFailure => MNone
        | OOutOfFuel => MOut
        end
    | cs :: rest' =>
        first_of (fun c =>
          if memb c ts then MNone else
          match run_prefix fuel n m (firstn (S (length ts)) ps) (ts ++ [c]) with
          | OSuccess _ _ => search fuel n m ps g (ts ++ [c]) rest'
          | OFailure => MNone
          | OOutOfFuel => MOut
          end) cs
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
    (exists suf, ts' = ts ++ suf /\ Forall2 (@In node) suf rest) /\
    (NoDup ts -> NoDup ts').
  Proof.
    intros fuel n m ps g rest. induction rest as [|cs rest IH]; intros ts ts' Θ Φ H;
      cbn [search] in H.
    - destruct (run_full fuel n m ps g ts) eqn:E; inversion H; subst.
      split; [exact E|]. split; [exists []; split; [rewrite app_nil_r; reflexivity | constructor]|].
      auto.
    - apply first_of_found in H as [c [Hc H]].
      destruct (memb c ts) eqn:Hm; [discriminate|].
      destruct (run_prefix _ _ _ _ _) eqn:E; try discriminate.
      apply IH in H as [Hr [[suf [-> Hs]] Hn]]. split; [exact Hr|]. split.
      + exists (c :: suf). split; [rewrite <- app_assoc; reflexivity | constructor; assumption].
      + intros Hts. apply Hn. apply NoDup_snoc; [exact Hts|].
        intros Hin. apply memb_In in Hin. congruence.
  Qed.

  Lemma search_none : forall fuel n m ps g rest ts,
    wf_defs D = true -> wf_multi ps g = true ->
    search fuel n m ps g ts rest = MNone ->
    forall suf σ ψ, Forall2 (@In node) suf rest ->
    (forall x, n <= x -> σ x = None) -> (forall F, m <= F -> ψ F = None) ->
    ~ mmatches G D σ ψ ps g (ts ++ suf).
  Proof.
    intros fuel n m ps g rest. induction rest as [|cs rest IH];
      intros ts Hd Hw H suf σ ψ Hs Hσ Hψ [Hm [Hg Hn]]; cbn [search] in H.
    - inversion Hs; subst. rewrite app_nil_r in *.
      destruct (run_full fuel n m ps g ts) eqn:E; try discriminate.
      assert (Hl : length ps = length ts) by (eapply matches_list_length; eauto).
      eapply run_start_fail; [exact Hd | apply wfk_full; eauto | apply below_full | exact E |].
      apply holds_of_fun; auto. constructor; [|constructor]. simpl.
      rewrite <- Hg. apply eval_guard_agree; intros y _; unfold tsub, fsub; simpl;
        apply gsub_ident_of_fun; auto.
    - inversion Hs as [|c cs' suf' rest' Hc Hs']; subst.
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

  (** Candidates of each later root: the nodes [0..N-1] its index admits. *)
  Definition mcands (R : rindex) (N : nat) (rs : list nat) : list (list node) :=
    map (fun r => filter (fun c => rs_mem (label G c) (ri_find R r)) (seq 0 N)) rs.

  (** [match_multi] with the index [R] and the candidate lists given (the
      library computes them once; [match_multi] is this function with
      [R = root_index D] and [cands = mcands R N (tl roots)]). *)
  Definition match_multi_c (R : rindex) (fuel : nat) (mp : mpat) (cands : list (list node))
      (t : node) : manswer :=
    match mp_roots mp, bodies (mp_roots mp) with
    | r1 :: _, Some (p1 :: ps') =>
        if rs_mem (label G t) (ri_find R r1) then
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

  (** [pypm_match_multi]: the multi-root pattern [mp] with its first root
      at [t], the others among the nodes [0..N-1]. *)
  Definition match_multi (fuel N : nat) (mp : mpat) (t : node) : manswer :=
    match_multi_c (root_index D) fuel mp (mcands (root_index D) N (tl (mp_roots mp))) t.

  Lemma bodies_length : forall rs ps, bodies rs = Some ps -> length ps = length rs.
  Proof.
    induction rs as [|r rs IH]; intros ps H; simpl in H; [inversion H; reflexivity|].
    destruct (nth_error D r); [|discriminate]. destruct (bodies rs) eqn:E; [|discriminate].
    inversion H; subst. simpl. rewrite (IH _ eq_refl). reflexivity.
  Qed.

  Lemma In_mcands : forall R N rs suf,
    Forall2 (@In node) suf (mcands R N rs) -> Forall (fun c => c < N) suf.
  Proof.
    intros R N rs. induction rs as [|r rs IH]; intros suf H; inversion H; subst; [constructor|].
    constructor; [|apply IH; assumption].
    match goal with Hx : In _ (filter _ _) |- _ =>
      apply filter_In in Hx as [Hx' _]; apply in_seq in Hx'; lia end.
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
      apply filter_In. split; [apply in_seq; lia|]. eapply root_index_sound; eauto.
  Qed.

  Lemma Forall2_len : forall A B (R : A -> B -> Prop) l1 l2,
    Forall2 R l1 l2 -> length l1 = length l2.
  Proof. intros A B R l1 l2 H. induction H; simpl; auto. Qed.

  Lemma project_props : forall Θ n,
    (forall x v, In (x, v) (project Θ n) -> x < n) /\
    StronglySorted (fun a b => fst a < fst b) (project Θ n).
  Proof.
    intros Θ n. split; [|apply project_from_sorted].
    intros x v Hx. apply project_from_In in Hx. lia.
  Qed.

  (** A match: the nodes are distinct, the first is the visited node, the
      others are nodes of the graph, and the bindings (the variables'
      substitution, sorted, only variables [< mp_n] / [< mp_m]) satisfy the
      declarative relation. *)
  Theorem match_multi_sound : forall fuel N mp t ts bs fbs,
    match_multi fuel N mp t = MMatch ts bs fbs ->
    exists ps, bodies (mp_roots mp) = Some ps /\
      hd_error ts = Some t /\ Forall (fun c => c < N) (tl ts) /\
      mmatches G D (assoc bs) (assoc fbs) ps (mp_guard mp) ts /\
      (forall x v, In (x, v) bs -> x < mp_n mp) /\
      (forall F f, In (F, f) fbs -> F < mp_m mp) /\
      StronglySorted (fun a b => fst a < fst b) bs /\
      StronglySorted (fun a b => fst a < fst b) fbs.
  Proof.
    intros fuel N mp t ts bs fbs H. unfold match_multi, match_multi_c in H.
    destruct (mp_roots mp) as [|r1 rs] eqn:Hr; [discriminate|].
    destruct (bodies (r1 :: rs)) as [[|p1 ps']|] eqn:Hb; try discriminate.
    destruct (rs_mem _ _); [|discriminate].
    destruct (run_prefix _ _ _ _ _) as [Θ0 Φ0| |]; try discriminate.
    destruct (search _ _ _ _ _ _ _) as [ts' Θ Φ| |] eqn:Hs; try discriminate.
    inversion H; subst. apply search_found in Hs as [Hrun [[suf [-> Hsuf]] Hnd]].
    exists (p1 :: ps'). split; [reflexivity|]. split; [reflexivity|].
    split; [simpl; eapply In_mcands; exact Hsuf|].
    destruct (project_props Θ (mp_n mp)) as [Hb1 Hs1].
    destruct (project_props Φ (mp_m mp)) as [Hb2 Hs2].
    split; [|repeat split; assumption].
    unfold run_full in Hrun. apply run_start_success in Hrun.
    assert (Hl : length (p1 :: ps') = length ([t] ++ suf)).
    { apply bodies_length in Hb. rewrite Hb. simpl. apply Forall2_len in Hsuf.
      unfold mcands in Hsuf. rewrite map_length in Hsuf. simpl in *. rewrite Hsuf. reflexivity. }
    apply Forall_push_inv in Hrun as [Hm Hg]; [|exact Hl].
    apply Forall_cons_iff in Hg as [Hg _]. simpl in Hg.
    split; [|split].
    - eapply matches_list_ext; [| |exact Hm]; intros y; unfold tsub, fsub; simpl;
        rewrite assoc_project; reflexivity.
    - rewrite <- Hg. apply eval_guard_agree; intros y _; unfold tsub, fsub; simpl;
        rewrite assoc_project; reflexivity.
    - apply Hnd. constructor; [intros []|constructor].
  Qed.

  (** No match: no tuple of distinct nodes, the first the visited node and
      the others nodes of the graph, matches under any substitution of the
      variables. *)
  Theorem match_multi_fail_sound : forall fuel N mp t ps,
    wf_defs D = true -> bodies (mp_roots mp) = Some ps -> wf_multi ps (mp_guard mp) = true ->
    match_multi fuel N mp t = MNoMatch ->
    forall ts σ ψ, hd_error ts = Some t -> Forall (fun c => c < N) (tl ts) ->
    (forall x, mp_n mp <= x -> σ x = None) -> (forall F, mp_m mp <= F -> ψ F = None) ->
    ~ mmatches G D σ ψ ps (mp_guard mp) ts.
  Proof.
    intros fuel N mp t ps Hd Hb Hw H ts σ ψ Ht Hlt Hσ Hψ Hmm.
    destruct ts as [|t0 suf]; [discriminate|]. simpl in Ht, Hlt. inversion Ht; subst t0.
    unfold match_multi, match_multi_c in H. rewrite Hb in H.
    destruct (mp_roots mp) as [|r1 rs] eqn:Hr.
    - simpl in Hb. inversion Hb; subst. destruct Hmm as [Hm _]. inversion Hm.
    - destruct ps as [|p1 ps'].
      + destruct Hmm as [Hm _]. inversion Hm.
      + simpl in Hb. destruct (nth_error D r1) as [d1|] eqn:Hd1; [|discriminate].
        destruct (bodies rs) as [ps''|] eqn:Hbs; [|discriminate].
        inversion Hb; subst p1 ps''.
        destruct Hmm as [Hm [Hg Hn]].
        inversion Hm as [|σ' ψ' p' ps0 t' ts0 Hm1 Hms]; subst.
        destruct (rs_mem (label G t) (ri_find (root_index D) r1)) eqn:Hi.
        2: { rewrite (root_index_sound G D r1 d1 σ ψ t Hd1 Hm1) in Hi. discriminate. }
        destruct (run_prefix fuel (mp_n mp) (mp_m mp) [body d1] [t]) eqn:E.
        * destruct (search _ _ _ _ _ _ _) eqn:Hs; try discriminate.
          eapply (search_none fuel (mp_n mp) (mp_m mp) _ _ _ [t] Hd Hw Hs suf σ ψ); auto.
          -- simpl. eapply mcands_complete; eauto.
          -- simpl. split; [exact Hm | split; assumption].
        * eapply run_start_fail; [exact Hd | | apply below_prefix | exact E |].
          -- apply wfk_prefix; [reflexivity|]. unfold wf_multi in Hw.
             apply andb_true_iff in Hw as [Hw _]. apply andb_true_iff in Hw as [Hw _].
             simpl in Hw. apply andb_true_iff in Hw as [Hw _]. simpl. rewrite Hw. reflexivity.
          -- apply holds_of_fun; auto. constructor; [exact Hm1 | constructor].
        * discriminate.
  Qed.

  (** ** Every match once *)

  Fixpoint mall (R : rindex) (fuel : nat) (mp : mpat) (cands : list (list node))
      (seen : list (list node)) (nodes : list node) : list (node * manswer) :=
    match nodes with
    | [] => []
    | t :: nodes' =>
        match match_multi_c R fuel mp cands t with
        | MNoMatch => mall R fuel mp cands seen nodes'
        | MMatch ts bs fbs =>
            if existsb (same_set ts) seen then mall R fuel mp cands seen nodes'
            else (t, MMatch ts bs fbs) :: mall R fuel mp cands (ts :: seen) nodes'
        | MOutOfFuel => (t, MOutOfFuel) :: mall R fuel mp cands seen nodes'
        end
    end.

  (** [pypm_match_all_multi]: the visited nodes [0..N-1] in increasing
      order; at each, [match_multi]'s answer, unless it is "no match" or a
      match whose set of nodes an earlier entry already has. *)
  Definition match_all_multi (fuel N : nat) (mp : mpat) : list (node * manswer) :=
    let R := root_index D in
    mall R fuel mp (mcands R N (tl (mp_roots mp))) [] (seq 0 N).

  Lemma mall_In : forall R fuel mp cands nodes seen t a,
    In (t, a) (mall R fuel mp cands seen nodes) ->
    In t nodes /\ match_multi_c R fuel mp cands t = a /\ a <> MNoMatch.
  Proof.
    intros R fuel mp cands nodes. induction nodes as [|t0 nodes IH]; intros seen t a H;
      simpl in H; [destruct H|].
    destruct (match_multi_c R fuel mp cands t0) as [ts bs fbs| |] eqn:E.
    - destruct (existsb (same_set ts) seen).
      + apply IH in H as [H1 H2]. split; [right|]; assumption.
      + destruct H as [H|H].
        * inversion H; subst. split; [left; reflexivity | split; [exact E | discriminate]].
        * apply IH in H as [H1 H2]. split; [right|]; assumption.
    - apply IH in H as [H1 H2]. split; [right|]; assumption.
    - destruct H as [H|H].
      + inversion H; subst. split; [left; reflexivity | split; [exact E | discriminate]].
      + apply IH in H as [H1 H2]. split; [right|]; assumption.
  Qed.

  Theorem match_all_multi_In : forall fuel N mp t a,
    In (t, a) (match_all_multi fuel N mp) ->
    t < N /\ match_multi fuel N mp t = a /\ a <> MNoMatch.
  Proof.
    intros fuel N mp t a H. apply mall_In in H as [H1 H2].
    apply in_seq in H1. split; [lia | exact H2].
  Qed.

  (** Two entries with the same set of nodes. *)
  Definition same_entry (e1 e2 : node * manswer) : Prop :=
    exists ts1 bs1 fbs1 ts2 bs2 fbs2,
      snd e1 = MMatch ts1 bs1 fbs1 /\ snd e2 = MMatch ts2 bs2 fbs2 /\
      forall x, In x ts1 <-> In x ts2.

  Lemma mall_once : forall R fuel mp cands nodes seen,
    ForallOrdPairs (fun e1 e2 => ~ same_entry e1 e2) (mall R fuel mp cands seen nodes) /\
    forall t ts bs fbs s, In (t, MMatch ts bs fbs) (mall R fuel mp cands seen nodes) ->
      In s seen -> same_set ts s = false.
  Proof.
    intros R fuel mp cands nodes. induction nodes as [|t0 nodes IH]; intros seen; simpl.
    - split; [constructor | intros _ _ _ _ _ []].
    - destruct (match_multi_c R fuel mp cands t0) as [ts bs fbs| |] eqn:E.
      + destruct (existsb (same_set ts) seen) eqn:Ex; [apply IH|].
        destruct (IH (ts :: seen)) as [Hp Hs]. split.
        * constructor; [|exact Hp]. apply Forall_forall. intros [t2 a2] Hin Hsame.
          destruct Hsame as (ts1 & bs1 & fbs1 & ts2 & bs2 & fbs2 & H1 & H2 & Hx).
          simpl in H1, H2. inversion H1; subst. apply (Hs t2 ts2 bs2 fbs2 ts1) in Hin;
            [|left; reflexivity].
          rewrite same_set_sym in Hin. assert (Hy : same_set ts1 ts2 = true)
            by (apply same_set_iff; exact Hx). congruence.
        * intros t ts' bs' fbs' s [Hin|Hin] Hsn.
          -- inversion Hin; subst. destruct (same_set ts' s) eqn:Es; auto.
             assert (existsb (same_set ts') seen = true)
               by (apply existsb_exists; exists s; auto). congruence.
          -- eapply Hs; [exact Hin | right; exact Hsn].
      + apply IH.
      + destruct (IH seen) as [Hp Hs]. split.
        * constructor; [|exact Hp]. apply Forall_forall. intros e _ Hsame.
          destruct Hsame as (ts1 & b1 & f1 & ts2 & b2 & f2 & H1 & _). discriminate.
        * intros t ts' bs' fbs' s [Hin|Hin] Hsn; [discriminate|]. eapply Hs; eauto.
  Qed.

  (** Every match once: no two entries of [match_all_multi] have the same
      set of nodes (a symmetric pattern is reported once per set of
      nodes, not once per permutation of its roots). *)
  Theorem match_all_multi_once : forall fuel N mp,
    ForallOrdPairs (fun e1 e2 => ~ same_entry e1 e2) (match_all_multi fuel N mp).
  Proof. intros. apply mall_once. Qed.

  Lemma seq_sorted : forall s n, StronglySorted lt (seq s n).
  Proof.
    intros s n. revert s. induction n as [|n IH]; intros s; simpl; constructor; auto.
    apply Forall_forall. intros x Hx. apply in_seq in Hx. lia.
  Qed.

  Lemma mall_complete : forall R fuel mp cands nodes seen t a,
    StronglySorted lt nodes -> In t nodes ->
    match_multi_c R fuel mp cands t = a -> a <> MNoMatch ->
    In (t, a) (mall R fuel mp cands seen nodes) \/
    exists ts bs fbs, a = MMatch ts bs fbs /\
      ((exists s, In s seen /\ forall x, In x ts <-> In x s) \/
       exists t' ts' bs' fbs', In (t', MMatch ts' bs' fbs') (mall R fuel mp cands seen nodes) /\
         t' < t /\ forall x, In x ts <-> In x ts').
  Proof.
    intros R fuel mp cands nodes. induction nodes as [|t0 nodes IH];
      intros seen t a Hsort Ht Ha Hno; [destruct Ht|].
    inversion Hsort as [|x l Hsort' Hlt]; subst x l. simpl.
    destruct Ht as [<-|Ht].
    - rewrite Ha. destruct a as [ts bs fbs| |]; [|congruence|left; left; reflexivity].
      destruct (existsb (same_set ts) seen) eqn:Ex; [|left; left; reflexivity].
      right. exists ts, bs, fbs. split; [reflexivity|]. left.
      apply existsb_exists in Ex as [s [Hs Hss]]. exists s. split; [exact Hs|].
      apply same_set_iff. exact Hss.
    - assert (Htl : t0 < t) by (rewrite Forall_forall in Hlt; apply Hlt; exact Ht).
      destruct (match_multi_c R fuel mp cands t0) as [ts0 bs0 fbs0| |] eqn:E0.
      + destruct (existsb (same_set ts0) seen) eqn:Ex.
        * exact (IH seen t a Hsort' Ht Ha Hno).
        * destruct (IH (ts0 :: seen) t a Hsort' Ht Ha Hno) as [Hin|(ts & bs & fbs & -> & Hor)].
          -- left. right. exact Hin.
          -- right. exists ts, bs, fbs. split; [reflexivity|].
             destruct Hor as [(s & [<-|Hs] & Hx)|(t' & ts' & bs' & fbs' & Hin & Hlt' & Hx)].
             ++ right. exists t0, ts0, bs0, fbs0. split; [left; reflexivity|]. auto.
             ++ left. exists s. auto.
             ++ right. exists t', ts', bs', fbs'. split; [right; exact Hin|]. auto.
      + exact (IH seen t a Hsort' Ht Ha Hno).
      + destruct (IH seen t a Hsort' Ht Ha Hno) as [Hin|(ts & bs & fbs & -> & Hor)].
        * left. right. exact Hin.
        * right. exists ts, bs, fbs. split; [reflexivity|].
          destruct Hor as [Hs|(t' & ts' & bs' & fbs' & Hin & Hlt' & Hx)]; [left; exact Hs|].
          right. exists t', ts', bs', fbs'. split; [right; exact Hin|]. auto.
  Qed.

  (** ... and at least once: every node's answer that is not "no match"
      is an entry, or a match whose set of nodes an entry of an earlier
      node has. *)
  Theorem match_all_multi_complete : forall fuel N mp t a,
    t < N -> match_multi fuel N mp t = a -> a <> MNoMatch ->
    In (t, a) (match_all_multi fuel N mp) \/
    exists ts bs fbs t' ts' bs' fbs', a = MMatch ts bs fbs /\
      In (t', MMatch ts' bs' fbs') (match_all_multi fuel N mp) /\ t' < t /\
      forall x, In x ts <-> In x ts'.
  Proof.
    intros fuel N mp t a Ht Ha Hno.
    destruct (mall_complete (root_index D) fuel mp (mcands (root_index D) N (tl (mp_roots mp)))
                (seq 0 N) [] t a (seq_sorted 0 N)) as [H|(ts & bs & fbs & -> & H)];
      [apply in_seq; lia | exact Ha | exact Hno | left; exact H|].
    right. destruct H as [(s & [] & _)|(t' & ts' & bs' & fbs' & Hin & Hlt & Hx)].
    exists ts, bs, fbs, t', ts', bs', fbs'. auto.
  Qed.
End Multi.
