(** * Relay's dominator pattern [dominates(P, I, C)] as a proved checker

    At a node [root] where the child pattern [C] matches, the *region* is
    found by walking up from [root] through the inputs: an input matched by
    the parent pattern [P] stops the walk (the parent), one matched by the
    path pattern [I] continues it, constant leaves are attributes and are
    skipped.  [dominates(P, I, C)] holds at [root] when

    - every node of the region other than [root] matches [P] or [I];
    - exactly one node of the region other than [root] matches [P];
    - every way up reaches it: each node the walk goes on from ([root] and
      the path nodes) has a non-constant input;
    - the parent is dominated by [root]: no node of the region other than
      [root] is an exit of the graph (an output, or a node nothing uses) or
      has a user outside the region.  [region_dominated] shows this implies
      that every way from a region node to an exit passes through [root].

    The graph is [N] nodes [0 .. N-1] with inputs [ch]; [konst] marks the
    constant leaves, [live] the nodes whose uses count (the users relation
    [users] is computed from the node table, over live nodes), [isOut] the
    outputs; [isP], [isI] are the per-node answers of the parent and path
    patterns (in the library, the proved [Entry.set_match]).  For speed the
    checker reads users from a table [U] the caller builds once; it checks
    [U] against the node table ([users_okb]: exactly the live users), so a
    wrong table can only make it say no ([dom_check_sound] needs nothing
    of [U]).

    Acyclicity is assumed in the strong form the Python graphs satisfy by
    construction (hash-consed, append-only): node ids are a topological
    order, every input of a node has a smaller id ([topo]).  The checker
    checks it ([topob]) and says no when it fails, so [dom_check_correct]
    is an equivalence with [topo /\ dominates_spec].  Under [topo], the
    region is computed by one sweep from [root] down, visiting the marked
    nodes in decreasing order (a node's users have larger ids, so its
    membership is final when the sweep reaches it); the recursion is
    bounded by [S root], which [sweep_inv] shows is enough.  [dom_all]
    checks [topo] and [U] once and answers for every node. *)
From Coq Require Import List Bool Arith Lia.
From PyPM Require Multi.
Import ListNotations.

Section Dominates.
  Variable N : nat.
  Variable ch : nat -> list nat.
  Variables konst live isOut isP isI : nat -> bool.
  Variable U : nat -> list nat.
  Variable root : nat.

  (** ** The declarative property *)

  Definition topo : Prop := forall n c, n < N -> In c (ch n) -> c < n.

  Definition user (u x : nat) : Prop := u < N /\ live u = true /\ In x (ch u).

  (** The walk goes on from [root] and from the nodes that do not match [P]. *)
  Definition expands (x : nat) : bool := (x =? root) || negb (isP x).

  Inductive reach : nat -> Prop :=
  | reach_root : reach root
  | reach_step : forall m c, reach m -> expands m = true -> In c (ch m) ->
                 konst c = false -> reach c.

  Definition exit_node (x : nat) : Prop := isOut x = true \/ forall u, ~ user u x.

  Definition dominates_spec : Prop :=
    root < N /\
    (forall x, reach x -> x <> root -> isP x = true \/ isI x = true) /\
    (exists p, reach p /\ p <> root /\ isP p = true /\
               forall q, reach q -> q <> root -> isP q = true -> q = p) /\
    (forall x, reach x -> expands x = true -> exists c, In c (ch x) /\ konst c = false) /\
    (forall x, reach x -> x <> root -> ~ exit_node x /\ forall u, user u x -> reach u).

  (** A way from [x] to an exit of the graph along users that avoids [root]. *)
  Inductive escapes : nat -> Prop :=
  | esc_exit : forall x, x <> root -> exit_node x -> escapes x
  | esc_step : forall x u, x <> root -> user u x -> escapes u -> escapes x.

  (** ** The checker *)

  (** The lists over every node are built by [Multi.seq_tr] (an
      accumulator, constant stack when extracted; [Multi.seq_tr_eq]: it is
      [seq]). *)
  Definition topob : bool :=
    forallb (fun n => forallb (fun c => c <? n) (ch n)) (Multi.seq_tr 0 N).

  Definition users (x : nat) : list nat :=
    filter (fun u => live u && existsb (Nat.eqb x) (ch u)) (seq 0 N).

  Definition memb (x : nat) (l : list nat) : bool := existsb (Nat.eqb x) l.

  (** [U] is exactly the live users, on nodes [0 .. N-1]. *)
  Definition users_okb : bool :=
    forallb (fun x => forallb (fun u => (u <? N) && live u && memb x (ch u)) (U x))
      (Multi.seq_tr 0 N) &&
    forallb (fun u => negb (live u) || forallb (fun c => memb u (U c)) (ch u)) (Multi.seq_tr 0 N).

  Definition users_ok : Prop := forall x u, x < N -> (In u (U x) <-> user u x).

  Definition succs (m : nat) : list nat :=
    if expands m then filter (fun c => negb (konst c)) (ch m) else [].

  (** The largest member of [R] below [k]. *)
  Fixpoint below (k : nat) (R : list nat) : option nat :=
    match R with
    | [] => None
    | x :: R' =>
        let b := below k R' in
        if x <? k then match b with Some y => Some (if y <? x then x else y) | None => Some x end
        else b
    end.

  (** The marked nodes below [k], largest first: each marks its [succs]. *)
  Fixpoint sweep (fuel k : nat) (R : list nat) : list nat :=
    match fuel with
    | 0 => R
    | S f => match below k R with
             | None => R
             | Some m => sweep f m (succs m ++ R)
             end
    end.

  Definition region : list nat := sweep (S root) (S root) [root].

  Definition parents : list nat := filter (fun x => negb (x =? root) && isP x) region.

  Definition dom_parent : option nat :=
    match parents with [] => None | p :: _ => Some p end.

  Definition one_parent : bool :=
    match parents with [] => false | p :: ps => forallb (Nat.eqb p) ps end.

  (** The check at [root], given [topo] and [users_ok]. *)
  Definition dom_core : bool :=
    (root <? N) &&
    forallb (fun x => (x =? root) || isP x || isI x) region &&
    one_parent &&
    forallb (fun x => negb (expands x) || existsb (fun c => negb (konst c)) (ch x)) region &&
    forallb (fun x => (x =? root) ||
                      (negb (isOut x) && negb (match U x with [] => true | _ => false end)
                       && forallb (fun u => memb u region) (U x))) region.

  Definition dom_check : bool := topob && users_okb && dom_core.

  (** What the library calls for one node: the answer, the parent, the region. *)
  Definition dom_result : bool * option nat * list nat := (dom_check, dom_parent, region).

  (** ** Proofs *)

  Lemma memb_In : forall x l, memb x l = true <-> In x l.
  Proof.
    intros x l; unfold memb; rewrite existsb_exists; split.
    - intros [y [Hy Heq]]; apply Nat.eqb_eq in Heq; subst; auto.
    - intros H; exists x; split; auto; apply Nat.eqb_refl.
  Qed.

  Lemma topob_topo : topob = true <-> topo.
  Proof.
    unfold topob, topo; rewrite Multi.seq_tr_eq, forallb_forall; split.
    - intros H n c Hn Hc. specialize (H n). rewrite in_seq in H.
      assert (Hf : forallb (fun c => c <? n) (ch n) = true) by (apply H; lia).
      rewrite forallb_forall in Hf. apply Nat.ltb_lt, Hf, Hc.
    - intros H n Hn. rewrite in_seq in Hn. apply forallb_forall.
      intros c Hc. apply Nat.ltb_lt, H; auto; lia.
  Qed.

  Lemma users_In : forall u x, In u (users x) <-> user u x.
  Proof.
    intros u x; unfold users, user; rewrite filter_In, in_seq, andb_true_iff,
      existsb_exists; split.
    - intros [Hr [Hl [y [Hy Heq]]]]. apply Nat.eqb_eq in Heq; subst. repeat split; auto; lia.
    - intros [Hu [Hl Hx]]. repeat split; auto; try lia. exists x; split; auto; apply Nat.eqb_refl.
  Qed.

  Lemma succs_In : forall m c, In c (succs m) <-> expands m = true /\ In c (ch m) /\ konst c = false.
  Proof.
    intros m c; unfold succs; destruct (expands m).
    - rewrite filter_In, negb_true_iff; intuition.
    - simpl; intuition discriminate.
  Qed.

  Lemma reach_le : topo -> root < N -> forall x, reach x -> x <= root.
  Proof.
    intros Ht HN x H; induction H; [lia|].
    assert (c < m) by (apply Ht; auto; lia). lia.
  Qed.

  (** The sweep's invariant: members reach, and members at or above [k]
      have all their [succs] in. *)
  Definition inv (k : nat) (R : list nat) : Prop :=
    (forall x, In x R -> reach x) /\ In root R /\
    (forall m c, In m R -> k <= m -> In c (succs m) -> In c R).

  Lemma below_some : forall k R m, below k R = Some m ->
    In m R /\ m < k /\ forall x, In x R -> x < k -> x <= m.
  Proof.
    intros k R; induction R as [|x R IH]; intros m H; simpl in H; [discriminate|].
    destruct (x <? k) eqn:Hx.
    - apply Nat.ltb_lt in Hx. destruct (below k R) as [y|] eqn:Hb.
      + destruct (IH y eq_refl) as [Hy [Hyk Hmax]].
        destruct (y <? x) eqn:Hyx; injection H as <-.
        * apply Nat.ltb_lt in Hyx. split; [left; auto|split; auto].
          intros z [<-|Hz] Hzk; [lia|]. specialize (Hmax z Hz Hzk); lia.
        * apply Nat.ltb_ge in Hyx. split; [right; auto|split; auto].
          intros z [<-|Hz] Hzk; [lia|]. auto.
      + injection H as <-. split; [left; auto|split; auto].
        intros z [<-|Hz] Hzk; [lia|].
        exfalso. clear IH. induction R as [|w R IHR]; [destruct Hz|].
        simpl in Hb. destruct (w <? k) eqn:Hw; [destruct (below k R); discriminate|].
        destruct Hz as [<-|Hz]; [apply Nat.ltb_ge in Hw; lia|]. apply IHR; auto.
    - destruct (IH m H) as [Hm [Hmk Hmax]]. split; [right; auto|split; auto].
      intros z [<-|Hz] Hzk; [apply Nat.ltb_ge in Hx; lia|]. auto.
  Qed.

  Lemma below_none : forall k R, below k R = None -> forall x, In x R -> k <= x.
  Proof.
    intros k R; induction R as [|y R IH]; intros H x Hx; [destruct Hx|]. simpl in H.
    destruct (y <? k) eqn:Hy; [destruct (below k R); discriminate|].
    destruct Hx as [<-|Hx]; [apply Nat.ltb_ge in Hy; lia|]. auto.
  Qed.

  Lemma sweep_inv : topo -> root < N ->
    forall fuel k R, k <= fuel -> k <= S root -> inv k R -> inv 0 (sweep fuel k R).
  Proof.
    intros Ht HN; induction fuel as [|f IH]; intros k R Hkf Hk Hinv; simpl.
    - replace k with 0 in Hinv by lia; auto.
    - destruct Hinv as [Hr [Hroot Hcl]]. destruct (below k R) as [m|] eqn:Hb.
      + destruct (below_some _ _ _ Hb) as [Hm [Hmk Hmax]].
        apply IH; [lia|lia|]. split; [|split].
        * intros x Hx; apply in_app_or in Hx; destruct Hx as [Hx|Hx]; auto.
          apply succs_In in Hx; destruct Hx as [He [Hc Hk']]. eapply reach_step; eauto.
        * apply in_or_app; auto.
        * intros m' c Hm' Hle Hc. apply in_or_app. apply in_app_or in Hm'.
          destruct Hm' as [Hm'|Hm'].
          -- apply succs_In in Hm'; destruct Hm' as [_ [Hin _]].
             assert (m' < m) by (apply Ht; auto; lia). lia.
          -- destruct (Nat.eq_dec m' m) as [->|Hne]; [left; auto|].
             right. destruct (le_lt_dec k m') as [Hkm|Hkm]; [apply (Hcl m'); auto|].
             specialize (Hmax m' Hm' Hkm). lia.
      + split; [|split]; auto. intros m c Hm _ Hc.
        apply (Hcl m); auto. apply (below_none _ _ Hb); auto.
  Qed.

  Theorem region_correct : topo -> root < N -> forall x, In x region <-> reach x.
  Proof.
    intros Ht HN.
    assert (Hi : inv 0 region).
    { apply sweep_inv; auto. split; [|split].
      - intros x [<-|[]]; constructor.
      - left; auto.
      - intros m c [<-|[]] Hle; lia. }
    destruct Hi as [Hr [Hroot Hcl]]. intros x; split; auto.
    intros H; induction H; auto. apply (Hcl m); [auto|lia|]. apply succs_In; auto.
  Qed.

  Lemma forallb_region : forall f, topo -> root < N ->
    forallb f region = true <-> forall x, reach x -> f x = true.
  Proof.
    intros f Ht HN; rewrite forallb_forall; split; intros H x Hx; apply H;
      apply (region_correct Ht HN); auto.
  Qed.

  Lemma parents_In : topo -> root < N -> forall x,
    In x parents <-> reach x /\ x <> root /\ isP x = true.
  Proof.
    intros Ht HN x; unfold parents; rewrite filter_In, (region_correct Ht HN), andb_true_iff,
      negb_true_iff, Nat.eqb_neq; tauto.
  Qed.

  Lemma users_okb_ok : users_okb = true -> users_ok.
  Proof.
    unfold users_okb, users_ok, user; rewrite !Multi.seq_tr_eq, andb_true_iff, !forallb_forall.
    intros [H1 H2] x u Hx; split.
    - intros Hu. assert (Hx' : In x (seq 0 N)) by (apply in_seq; lia).
      specialize (H1 x Hx'). rewrite forallb_forall in H1. specialize (H1 u Hu).
      rewrite !andb_true_iff, Nat.ltb_lt, memb_In in H1. tauto.
    - intros [Hu [Hl Hc]]. assert (Hu' : In u (seq 0 N)) by (apply in_seq; lia).
      specialize (H2 u Hu'). rewrite Hl in H2; simpl in H2. rewrite forallb_forall in H2.
      apply memb_In, H2, Hc.
  Qed.

  Lemma users_ok_okb : topo -> users_ok -> users_okb = true.
  Proof.
    intros Ht Hu. unfold users_okb; rewrite !Multi.seq_tr_eq, andb_true_iff, !forallb_forall; split.
    - intros x Hx. apply in_seq in Hx. apply forallb_forall. intros u Hin.
      apply (Hu x u) in Hin; [|lia]. destruct Hin as [Hn [Hl Hc]].
      rewrite (proj2 (Nat.ltb_lt _ _) Hn), Hl; simpl. apply memb_In; auto.
    - intros u Hu'. apply in_seq in Hu'. destruct (live u) eqn:Hl; auto. simpl.
      apply forallb_forall. intros c Hc. apply memb_In.
      assert (c < u) by (apply Ht; auto; lia). apply Hu; [lia|]. split; [lia|split; auto].
  Qed.

  Theorem dom_core_correct : topo -> users_ok -> (dom_core = true <-> dominates_spec).
  Proof.
    intros Ht HU. unfold dom_core, dominates_spec; split.
    - intros H. repeat rewrite andb_true_iff in H.
      destruct H as [[[[HN Hwalk] Hone] Hdead] Hdom]. apply Nat.ltb_lt in HN.
      rewrite (forallb_region _ Ht HN) in Hwalk. rewrite (forallb_region _ Ht HN) in Hdead.
      rewrite (forallb_region _ Ht HN) in Hdom.
      split; [auto|split; [|split; [|split]]].
      + intros x Hx Hne. specialize (Hwalk x Hx). apply Nat.eqb_neq in Hne; rewrite Hne in Hwalk.
        simpl in Hwalk. apply orb_true_iff in Hwalk; tauto.
      + unfold one_parent in Hone. destruct parents as [|p ps] eqn:Hps; [discriminate|].
        assert (Hp : In p parents) by (rewrite Hps; left; auto).
        apply (parents_In Ht HN) in Hp. destruct Hp as [Hp1 [Hp2 Hp3]].
        exists p; repeat split; auto. intros q Hq Hqr HqP.
        assert (Hin : In q parents) by (apply (parents_In Ht HN); auto).
        rewrite Hps in Hin. destruct Hin as [->|Hin]; auto.
        rewrite forallb_forall in Hone. symmetry; apply Nat.eqb_eq, Hone, Hin.
      + intros x Hx He. specialize (Hdead x Hx). rewrite He in Hdead. simpl in Hdead.
        apply existsb_exists in Hdead. destruct Hdead as [c [Hc Hk]].
        exists c; split; auto; apply negb_true_iff; auto.
      + intros x Hx Hne. assert (HxN : x < N) by (pose proof (reach_le Ht HN x Hx); lia).
        specialize (Hdom x Hx). apply Nat.eqb_neq in Hne; rewrite Hne in Hdom.
        simpl in Hdom. repeat rewrite andb_true_iff in Hdom. destruct Hdom as [[Ho Hu] Hall].
        split.
        * intros [Hout|Hno]; [rewrite Hout in Ho; discriminate|].
          destruct (U x) as [|u us] eqn:Hus; [discriminate|].
          apply (Hno u), (HU x u HxN). rewrite Hus; left; auto.
        * intros u Hux. rewrite forallb_forall in Hall. apply (HU x u HxN) in Hux.
          apply (region_correct Ht HN), memb_In, Hall, Hux.
    - intros [HN [Hwalk [[p [Hp1 [Hp2 [Hp3 Huniq]]]] [Hdead Hdom]]]].
      apply Nat.ltb_lt in HN as HNb.
      repeat rewrite andb_true_iff.
      split; [split; [split; [split; auto|]|]|];
        try (apply (forallb_region _ Ht HN)).
      + intros x Hx. destruct (x =? root) eqn:Hr; auto. apply Nat.eqb_neq in Hr.
        destruct (Hwalk x Hx Hr) as [H|H]; rewrite H; simpl; auto using orb_true_r.
      + unfold one_parent. assert (Hin : In p parents) by (apply parents_In; auto).
        destruct parents as [|q qs] eqn:Hps; [destruct Hin|].
        assert (Hq : q = p).
        { assert (Hq : In q parents) by (rewrite Hps; left; auto).
          apply (parents_In Ht HN) in Hq. destruct Hq as [? [? ?]]; auto. }
        subst q. apply forallb_forall. intros y Hy.
        assert (Hy' : In y parents) by (rewrite Hps; right; auto).
        apply (parents_In Ht HN) in Hy'. destruct Hy' as [? [? ?]].
        apply Nat.eqb_eq; symmetry; auto.
      + intros x Hx. destruct (expands x) eqn:He; auto. simpl.
        destruct (Hdead x Hx He) as [c [Hc Hk]]. apply existsb_exists.
        exists c; split; auto; rewrite Hk; auto.
      + intros x Hx. destruct (x =? root) eqn:Hr; auto. apply Nat.eqb_neq in Hr.
        assert (HxN : x < N) by (pose proof (reach_le Ht HN x Hx); lia).
        destruct (Hdom x Hx Hr) as [Hex Hall]. simpl. repeat rewrite andb_true_iff. split; [split|].
        * destruct (isOut x) eqn:Ho; auto. exfalso; apply Hex; left; auto.
        * destruct (U x) as [|u us] eqn:Hus; auto. exfalso; apply Hex; right.
          intros u Hu. apply (HU x u HxN) in Hu. rewrite Hus in Hu; destruct Hu.
        * apply forallb_forall; intros u Hu. apply (HU x u HxN) in Hu.
          apply memb_In, (region_correct Ht HN), Hall, Hu.
  Qed.

  (** Sound whatever [U] is; complete when [U] is the users table. *)
  Theorem dom_check_sound : dom_check = true -> topo /\ dominates_spec.
  Proof.
    unfold dom_check; rewrite !andb_true_iff; intros [[Ht Hu] Hc].
    apply topob_topo in Ht. split; auto. apply users_okb_ok in Hu.
    apply (dom_core_correct Ht Hu); auto.
  Qed.

  Theorem dom_check_correct : users_ok -> (dom_check = true <-> topo /\ dominates_spec).
  Proof.
    intros Hu; split; [apply dom_check_sound|]. intros [Ht Hs].
    unfold dom_check; rewrite !andb_true_iff; split; [split|].
    - apply topob_topo; auto.
    - apply users_ok_okb; auto.
    - apply (dom_core_correct Ht Hu); auto.
  Qed.

  (** The region is dominated: no way from one of its nodes other than
      [root] reaches an exit without passing through [root]. *)
  Theorem region_dominated : dominates_spec -> forall x, reach x -> ~ escapes x.
  Proof.
    intros [_ [_ [_ [_ Hdom]]]] x Hx He. induction He as [x Hne Hex|x u Hne Hu He IH].
    - destruct (Hdom x Hx Hne) as [H _]; auto.
    - apply IH. destruct (Hdom x Hx Hne) as [_ H]; auto.
  Qed.

  (** Every way up from [root] ends at the parent: in the region, the nodes
      the walk goes on from are not exits of the walk, and the only node it
      stops at is the parent. *)
  Theorem dom_parent_correct : dom_check = true ->
    exists p, dom_parent = Some p /\ reach p /\ p <> root /\ isP p = true /\
              forall q, reach q -> q <> root -> isP q = true -> q = p.
  Proof.
    intros H. pose proof H as H'. apply dom_check_sound in H'.
    destruct H' as [Ht [HN [_ [[p [Hp1 [Hp2 [Hp3 Hu]]]] _]]]].
    exists p; repeat split; auto. unfold dom_parent.
    assert (Hin : In p parents) by (apply parents_In; auto).
    destruct parents as [|q qs] eqn:Hps; [destruct Hin|].
    assert (Hq : In q parents) by (rewrite Hps; left; auto).
    apply (parents_In Ht HN) in Hq. destruct Hq as [? [? ?]]. f_equal; auto.
  Qed.
End Dominates.

(** Every node at once, for [pm.match_all]: [topo] and the users table are
    checked once ([None] if either fails), then each node where the child
    pattern matches ([isC]) gets [dom_core]'s answer, its parent and region.
    The list is built in constant stack ([Multi.filter_upto], then a
    [fold_left] and a [rev_append]); [dom_all_map]: it is the [map] over
    [filter isC (seq 0 N)]. *)
Definition dom_entry (N : nat) (ch : nat -> list nat) (konst isOut isP isI : nat -> bool)
    (U : nat -> list nat) (r : nat) : nat * bool * option nat * list nat :=
  (r, dom_core N ch konst isOut isP isI U r, dom_parent ch konst isP r, region ch konst isP r).

Definition dom_all (N : nat) (ch : nat -> list nat) (konst live isOut isP isI isC : nat -> bool)
    (U : nat -> list nat) : option (list (nat * bool * option nat * list nat)) :=
  if topob N ch && users_okb N ch live U then
    Some (rev_append (fold_left (fun acc r => dom_entry N ch konst isOut isP isI U r :: acc)
                                (Multi.filter_upto isC N) []) [])
  else None.

Lemma fold_left_cons_rev : forall {A B} (f : A -> B) l acc,
  fold_left (fun acc r => f r :: acc) l acc = rev (map f l) ++ acc.
Proof.
  intros A B f l; induction l as [|x l IH]; intros acc; simpl; auto.
  rewrite IH, <- app_assoc; reflexivity.
Qed.

Lemma dom_all_map : forall N ch konst live isOut isP isI isC U,
  dom_all N ch konst live isOut isP isI isC U =
  if topob N ch && users_okb N ch live U then
    Some (map (dom_entry N ch konst isOut isP isI U) (filter isC (seq 0 N)))
  else None.
Proof.
  intros. unfold dom_all. destruct (_ && _); auto.
  rewrite fold_left_cons_rev, app_nil_r, <- rev_alt, rev_involutive, Multi.filter_upto_eq.
  reflexivity.
Qed.

Theorem dom_all_correct : forall N ch konst live isOut isP isI isC U l,
  dom_all N ch konst live isOut isP isI isC U = Some l ->
  topo N ch /\
  (forall r b p R, In (r, b, p, R) l ->
     isC r = true /\ (b = true <-> dominates_spec N ch konst live isOut isP isI r) /\
     p = dom_parent ch konst isP r /\ R = region ch konst isP r) /\
  (forall r, r < N -> isC r = true -> exists b p R, In (r, b, p, R) l).
Proof.
  intros N ch konst live isOut isP isI isC U l H. rewrite dom_all_map in H.
  destruct (topob N ch && users_okb N ch live U) eqn:Hc; [|discriminate].
  injection H as <-. apply andb_true_iff in Hc. destruct Hc as [Ht Hu].
  apply topob_topo in Ht. apply (users_okb_ok N ch konst live isOut isP isI U) in Hu.
  split; [auto|split].
  - intros r b p R Hin. apply in_map_iff in Hin. destruct Hin as [r' [Heq Hin]].
    unfold dom_entry in Heq. injection Heq as <- <- <- <-. apply filter_In in Hin. destruct Hin as [_ HC].
    split; [auto|split; [|split; auto]].
    apply dom_core_correct; auto.
  - intros r Hr HC. do 3 eexists. apply in_map_iff. eexists; split; [reflexivity|].
    apply filter_In; split; auto. apply in_seq; lia.
Qed.
