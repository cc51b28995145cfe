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
    patterns (in the library, the proved [Entry.set_match]).

    Acyclicity is assumed in the strong form the Python graphs satisfy by
    construction (hash-consed, append-only): node ids are a topological
    order, every input of a node has a smaller id ([topo]).  The checker
    checks it ([topob]) and says no when it fails, so [dom_check_correct]
    is an equivalence with [topo /\ dominates_spec].  Under [topo], the
    region is computed by one sweep from [root] down to [0] (a node's users
    have larger ids, so its membership is final when the sweep reaches it):
    no fuel is needed, the recursion is structural. *)
From Coq Require Import List Bool Arith Lia.
Import ListNotations.

Section Dominates.
  Variable N : nat.
  Variable ch : nat -> list nat.
  Variables konst live isOut isP isI : nat -> bool.
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

  Definition topob : bool := forallb (fun n => forallb (fun c => c <? n) (ch n)) (seq 0 N).

  Definition users (x : nat) : list nat :=
    filter (fun u => live u && existsb (Nat.eqb x) (ch u)) (seq 0 N).

  Definition memb (x : nat) (l : list nat) : bool := existsb (Nat.eqb x) l.

  Definition succs (m : nat) : list nat :=
    if expands m then filter (fun c => negb (konst c)) (ch m) else [].

  (** Nodes [k-1] down to [0]: a marked node marks its [succs]. *)
  Fixpoint sweep (k : nat) (R : list nat) : list nat :=
    match k with
    | 0 => R
    | S k' => sweep k' (if memb k' R then succs k' ++ R else R)
    end.

  Definition region : list nat := sweep (S root) [root].

  Definition parents : list nat := filter (fun x => negb (x =? root) && isP x) region.

  Definition dom_parent : option nat :=
    match parents with [] => None | p :: _ => Some p end.

  Definition one_parent : bool :=
    match parents with [] => false | p :: ps => forallb (Nat.eqb p) ps end.

  Definition dom_check : bool :=
    topob && (root <? N) &&
    forallb (fun x => (x =? root) || isP x || isI x) region &&
    one_parent &&
    forallb (fun x => negb (expands x) || existsb (fun c => negb (konst c)) (ch x)) region &&
    forallb (fun x => (x =? root) ||
                      (negb (isOut x) && negb (match users x with [] => true | _ => false end)
                       && forallb (fun u => memb u region) (users x))) region.

  (** What the library calls: the answer, the parent, the region. *)
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
    unfold topob, topo; rewrite forallb_forall; split.
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

  Lemma sweep_inv : topo -> root < N -> forall k R, k <= S root -> inv k R -> inv 0 (sweep k R).
  Proof.
    intros Ht HN; induction k as [|k IH]; intros R Hk [Hr [Hroot Hcl]]; simpl; [split; auto|].
    apply IH; [lia|]. destruct (memb k R) eqn:Hm.
    - apply memb_In in Hm. split; [|split].
      + intros x Hx; apply in_app_or in Hx; destruct Hx as [Hx|Hx]; auto.
        apply succs_In in Hx; destruct Hx as [He [Hc Hk']]. eapply reach_step; eauto.
      + apply in_or_app; auto.
      + intros m c Hm' Hkm Hc. apply in_app_or in Hm'; destruct Hm' as [Hm'|Hm'].
        * apply succs_In in Hm'; destruct Hm' as [_ [Hin _]].
          assert (m < k) by (apply Ht; auto; lia). lia.
        * apply in_or_app. destruct (Nat.eq_dec m k) as [->|Hne]; [left; auto|].
          right; apply (Hcl m); auto; lia.
    - split; [|split]; auto.
      intros m c Hm' Hkm Hc. destruct (Nat.eq_dec m k) as [->|Hne].
      + apply memb_In in Hm'; congruence.
      + apply (Hcl m); auto; lia.
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

  Theorem dom_check_correct : dom_check = true <-> topo /\ dominates_spec.
  Proof.
    unfold dom_check, dominates_spec; split.
    - intros H. repeat rewrite andb_true_iff in H.
      destruct H as [[[[[Htb HN] Hwalk] Hone] Hdead] Hdom].
      apply topob_topo in Htb as Ht. apply Nat.ltb_lt in HN.
      rewrite (forallb_region _ Ht HN) in Hwalk. rewrite (forallb_region _ Ht HN) in Hdead.
      rewrite (forallb_region _ Ht HN) in Hdom.
      split; [auto|split; [auto|split; [|split; [|split]]]].
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
      + intros x Hx Hne. specialize (Hdom x Hx). apply Nat.eqb_neq in Hne; rewrite Hne in Hdom.
        simpl in Hdom. repeat rewrite andb_true_iff in Hdom. destruct Hdom as [[Ho Hu] Hall].
        split.
        * intros [Hout|Hno]; [rewrite Hout in Ho; discriminate|].
          destruct (users x) as [|u us] eqn:Hus; [discriminate|].
          apply (Hno u), users_In; rewrite Hus; left; auto.
        * intros u Hux. rewrite forallb_forall in Hall. apply users_In in Hux.
          apply (region_correct Ht HN), memb_In, Hall, Hux.
    - intros [Ht [HN [Hwalk [[p [Hp1 [Hp2 [Hp3 Huniq]]]] [Hdead Hdom]]]]].
      apply Nat.ltb_lt in HN as HNb. apply topob_topo in Ht as Htb.
      repeat rewrite andb_true_iff.
      split; [split; [split; [split; [split; auto|]|]|]|];
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
        destruct (Hdom x Hx Hr) as [Hex Hall]. simpl. repeat rewrite andb_true_iff. split; [split|].
        * destruct (isOut x) eqn:Ho; auto. exfalso; apply Hex; left; auto.
        * destruct (users x) as [|u us] eqn:Hus; auto. exfalso; apply Hex; right.
          intros u Hu. apply users_In in Hu. rewrite Hus in Hu; destruct Hu.
        * apply forallb_forall; intros u Hu. apply users_In in Hu.
          apply memb_In, (region_correct Ht HN), Hall, Hu.
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
    intros H. pose proof H as H'. apply dom_check_correct in H'.
    destruct H' as [Ht [HN [_ [[p [Hp1 [Hp2 [Hp3 Hu]]]] _]]]].
    exists p; repeat split; auto. unfold dom_parent.
    assert (Hin : In p parents) by (apply parents_In; auto).
    destruct parents as [|q qs] eqn:Hps; [destruct Hin|].
    assert (Hq : In q parents) by (rewrite Hps; left; auto).
    apply (parents_In Ht HN) in Hq. destruct Hq as [? [? ?]]. f_equal; auto.
  Qed.
End Dominates.
