(** * The children's index: which operators a definition's root's arguments can have

    [RootIndex.v] says which operators a definition's root can have; this
    file says the same of the root's arguments, position by position. For
    each definition, [kid_index] gives a [kset]: [None] (no match at any
    node) or [Some [r0; r1; …]], where the [i]-th argument of a matching
    node has an operator in [ri] (positions past the list are not
    constrained). It is the least solution of
      kids(x) = [], kids(f(p0..pn)) = kids(F(p0..pn)) = [root(p0); …; root(pn)],
      kids(p ‖ p') = kids(p) ∪ kids(p') (position by position, the common
      positions), kids(p ; g) = kids(∃x.p) = kids(∃F.p) = kids(p ; (p' ≈ x))
      = kids(p), kids(P(..)) = index(P)
    ([root] the root index), computed by Kleene iteration from [None]
    everywhere, checked to be a post-fixpoint, else the empty index (every
    lookup unconstrained), as the root index is.

    [kid_index_sound]: a definition whose index rejects a node's
    arguments has no declarative match there. The driver asks it, with the
    root index, before calling the matcher at a node ([pypm_candidates_at],
    [Entry.candidates_at]): a [view] whose argument is no [bmm] is not a
    candidate of a pattern rooted at [view(bmm(..))]. *)

From Coq Require Import ZArith List Bool Arith Lia.
From PyPM Require Import Syntax Subst Declarative RootIndex.
Import ListNotations.

(** The arguments' operators, by position; [None]: no match at all. *)
Definition kset := option (list rootset).

Fixpoint zip_union (a b : list rootset) : list rootset :=
  match a, b with
  | x :: a', y :: b' => rs_union x y :: zip_union a' b'
  | _, _ => []
  end.

Definition k_union (a b : kset) : kset :=
  match a, b with
  | None, k | k, None => k
  | Some x, Some y => Some (zip_union x y)
  end.

(** [a ⊆ b], position by position ([b] may constrain fewer positions). *)
Fixpoint kl_le (a b : list rootset) : bool :=
  match a, b with
  | _, [] => true
  | x :: a', y :: b' => rs_le x y && kl_le a' b'
  | [], _ :: _ => false
  end.

Definition k_le (a b : kset) : bool :=
  match a, b with
  | None, _ => true
  | Some _, None => false
  | Some x, Some y => kl_le x y
  end.

(** Whether the operators [fs] of the arguments (each with its attributes)
    are admitted, position by position. *)
Fixpoint kl_mem (l : list rootset) (fs : list (symbol * (attribute -> option Z))) : bool :=
  match l, fs with
  | r :: l', (f, sa) :: fs' => rs_mem sa f r && kl_mem l' fs'
  | _, _ => true
  end.

Definition k_mem (k : kset) (fs : list (symbol * (attribute -> option Z))) : bool :=
  match k with None => false | Some l => kl_mem l fs end.

(** A node's arguments as [k_mem] reads them: operator and its attributes. *)
Definition kid_syms (G : graph) (t : node) : list (symbol * (attribute -> option Z)) :=
  map (fun c => (label G c, sym_attrs G (label G c))) (children G t).

(** An index: definition number -> its kset ([Some []] when absent). *)
Definition kindex := VarMap.t kset.

Definition ki_find (K : kindex) (P : pname) : kset :=
  match VarMap.find P K with Some k => k | None => Some [] end.

(** The arguments' operators of [p]'s root, reading roots in [R] and calls
    in [K]. *)
Fixpoint kids_of (R : rindex) (K : kindex) (p : pattern) : kset :=
  match p with
  | PVar _ => Some []
  | PApp _ ps | PFunVar _ ps => Some (map (root_of R) ps)
  | PAlt p1 p2 => k_union (kids_of R K p1) (kids_of R K p2)
  | PGuard p _ | PExists _ p | PExistsF _ p | PConstr p _ _ => kids_of R K p
  | PCall P _ _ => ki_find K P
  end.

Fixpoint ktabulate (f : pdef -> kset) (D : list pdef) (i : nat) (acc : kindex) : kindex :=
  match D with
  | [] => acc
  | d :: D' => ktabulate f D' (S i) (VarMap.add i (f d) acc)
  end.

Definition kindex_step (D : list pdef) (R : rindex) (K : kindex) : kindex :=
  ktabulate (fun d => kids_of R K (body d)) D 0 (VarMap.empty kset).

Definition kindex_bottom (D : list pdef) : kindex :=
  ktabulate (fun _ => None) D 0 (VarMap.empty kset).

(** [K] is a post-fixpoint for the definitions [D] numbered from [i]. *)
Fixpoint kpost_from (D : list pdef) (R : rindex) (K : kindex) (i : nat) : bool :=
  match D with
  | [] => true
  | d :: D' => k_le (kids_of R K (body d)) (ki_find K i) && kpost_from D' R K (S i)
  end.

Fixpoint kiterate (D : list pdef) (R : rindex) (k : nat) (K : kindex) : option kindex :=
  if kpost_from D R K 0 then Some K
  else match k with
       | O => None
       | S k' => kiterate D R k' (kindex_step D R K)
       end.

Definition kid_index (D : list pdef) (R : rindex) : kindex :=
  match kiterate D R index_rounds (kindex_bottom D) with
  | Some K => K
  | None => VarMap.empty kset
  end.

(** The kset of each root of a set (in order), for the root index of [D]. *)
Definition kid_table (D : list pdef) (roots : list nat) : list kset :=
  let K := kid_index D (root_index D) in map (ki_find K) roots.

(** ** The lattice facts *)

Lemma kl_mem_zip_union : forall a b fs, kl_mem a fs = true -> kl_mem (zip_union a b) fs = true.
Proof.
  induction a as [|x a IH]; intros [|y b] fs H; simpl; auto.
  destruct fs as [|[f sa] fs]; auto. simpl in H. apply andb_true_iff in H.
  destruct H as [H1 H2]. simpl. rewrite rs_mem_union by auto. simpl. auto.
Qed.

Lemma kl_mem_zip_union_r : forall a b fs, kl_mem b fs = true -> kl_mem (zip_union a b) fs = true.
Proof.
  induction a as [|x a IH]; intros [|y b] fs H; simpl; auto.
  destruct fs as [|[f sa] fs]; auto. simpl in H. apply andb_true_iff in H.
  destruct H as [H1 H2]. simpl. rewrite rs_mem_union by auto. simpl. auto.
Qed.

Lemma k_mem_union_l : forall a b fs, k_mem a fs = true -> k_mem (k_union a b) fs = true.
Proof.
  intros [a|] [b|] fs H; simpl in *; try discriminate; auto. apply kl_mem_zip_union. exact H.
Qed.

Lemma k_mem_union_r : forall a b fs, k_mem b fs = true -> k_mem (k_union a b) fs = true.
Proof.
  intros [a|] [b|] fs H; simpl in *; try discriminate; auto. apply kl_mem_zip_union_r. exact H.
Qed.

Lemma kl_mem_le : forall a b fs, kl_le a b = true -> kl_mem a fs = true -> kl_mem b fs = true.
Proof.
  induction a as [|x a IH]; intros [|y b] fs Hle H; simpl in *; auto; try discriminate.
  destruct fs as [|[f sa] fs]; auto. apply andb_true_iff in Hle. destruct Hle as [L1 L2].
  apply andb_true_iff in H. destruct H as [H1 H2].
  rewrite (rs_mem_le sa f x y L1 H1). simpl. eauto.
Qed.

Lemma k_mem_le : forall a b fs, k_le a b = true -> k_mem a fs = true -> k_mem b fs = true.
Proof.
  intros [a|] [b|] fs Hle H; simpl in *; try discriminate. eapply kl_mem_le; eauto.
Qed.

Lemma find_ktabulate : forall f D i acc j,
  VarMap.find j (ktabulate f D i acc) =
    if Nat.leb i j then
      match nth_error D (j - i) with
      | Some d => Some (f d)
      | None => VarMap.find j acc
      end
    else VarMap.find j acc.
Proof.
  intros f D. induction D as [|d D IH]; intros i acc j; simpl.
  - destruct (Nat.leb i j); [destruct (j - i)|]; reflexivity.
  - rewrite IH. destruct (Nat.eqb i j) eqn:E.
    + apply Nat.eqb_eq in E. subst j.
      destruct (Nat.leb (S i) i) eqn:L; [apply Nat.leb_le in L; lia|].
      rewrite Nat.leb_refl, Nat.sub_diag. simpl.
      apply VarMapF.add_eq_o. reflexivity.
    + apply Nat.eqb_neq in E.
      rewrite VarMapF.add_neq_o by exact E.
      destruct (Nat.leb (S i) j) eqn:L1; destruct (Nat.leb i j) eqn:L2;
        rewrite ?Nat.leb_le, ?Nat.leb_gt in *; try lia; auto.
      replace (j - i) with (S (j - S i)) by lia. simpl. reflexivity.
Qed.

Lemma kpost_from_nth : forall D R K i j d,
  kpost_from D R K i = true -> nth_error D j = Some d ->
  k_le (kids_of R K (body d)) (ki_find K (i + j)) = true.
Proof.
  induction D as [|d0 D IH]; intros R K i j d H Hn; [destruct j; discriminate|].
  simpl in H. apply andb_true_iff in H. destruct H as [H1 H2].
  destruct j as [|j]; simpl in Hn.
  - inversion Hn; subst. rewrite Nat.add_0_r. exact H1.
  - replace (i + S j) with (S i + j) by lia. eauto.
Qed.

Lemma kpost_from_empty : forall D R i, kpost_from D R (VarMap.empty kset) i = true.
Proof.
  induction D as [|d D IH]; intros R i; simpl; auto.
  rewrite IH, andb_true_r. unfold ki_find. rewrite VarMapF.empty_o.
  destruct (kids_of _ _ (body d)) as [[|]|]; reflexivity.
Qed.

Lemma kiterate_post : forall D R k K K', kiterate D R k K = Some K' -> kpost_from D R K' 0 = true.
Proof.
  intros D R k. induction k as [|k IH]; intros K K' H; simpl in H;
    destruct (kpost_from D R K 0) eqn:E; try discriminate; try (inversion H; subst; exact E).
  eapply IH; eauto.
Qed.

Lemma kid_index_post : forall D R, kpost_from D R (kid_index D R) 0 = true.
Proof.
  intros D R. unfold kid_index.
  destruct (kiterate D R index_rounds (kindex_bottom D)) eqn:E.
  - eapply kiterate_post; eauto.
  - apply kpost_from_empty.
Qed.

(** ** Soundness *)

Section Sound.
  Variable G : graph.
  Variable D : list pdef.

  (** Arguments matching [ps] have operators of the roots of [ps]. *)
  Lemma kids_list_sound : forall R, post_from D R 0 = true ->
    forall σ ψ ps ts, matches_list G D σ ψ ps ts ->
    kl_mem (map (root_of R) ps) (map (fun c => (label G c, sym_attrs G (label G c))) ts) = true.
  Proof.
    intros R HR σ ψ ps. induction ps as [|p ps IH]; intros ts H; [reflexivity|].
    inversion H; subst. simpl.
    match goal with Hp : matches _ _ _ _ p _ |- _ =>
      pose proof (root_of_sound G D R HR _ _ _ _ Hp) as Ha end.
    unfold admits in Ha. rewrite Ha. simpl. eauto.
  Qed.

  (** A match's root has arguments of [kids_of R K p], for post-fixpoints
      [R] (roots) and [K] (arguments). *)
  Lemma kids_of_sound : forall R K, post_from D R 0 = true -> kpost_from D R K 0 = true ->
    forall σ ψ p t, matches G D σ ψ p t -> k_mem (kids_of R K p) (kid_syms G t) = true.
  Proof.
    intros R K HR HK σ ψ p t H. unfold kid_syms.
    induction H using matches_mut with
      (P0 := fun _ _ _ _ _ => True); simpl; auto.
    - eapply kids_list_sound; eauto.
    - apply k_mem_union_l. exact IHmatches.
    - apply k_mem_union_r. exact IHmatches.
    - eapply kids_list_sound; eauto.
    - eapply k_mem_le; [|exact IHmatches].
      apply (kpost_from_nth D R K 0 P d HK e).
  Qed.

  (** The index is sound: a definition whose index rejects a node's
      arguments has no match there, whatever the substitutions. *)
  Theorem kid_index_sound : forall P d σ ψ t,
    nth_error D P = Some d -> matches G D σ ψ (body d) t ->
    k_mem (ki_find (kid_index D (root_index D)) P) (kid_syms G t) = true.
  Proof.
    intros P d σ ψ t Hd Hm.
    eapply k_mem_le; [|eapply kids_of_sound;
                       [apply root_index_post | apply kid_index_post | exact Hm]].
    apply (kpost_from_nth D _ _ 0 P d (kid_index_post D _) Hd).
  Qed.
End Sound.
