(** * The shapes index: which operators a definition's root and its arguments can have

    [RootIndex.v] says which operators a definition's root can have; this
    file says it of the root together with its arguments. For each
    definition, [kid_index] gives a [kset]: a list of shapes
    [(root operators, [arg 0 operators; arg 1 operators; …])], one of which
    every matching node has (positions past a shape's list unconstrained;
    [[]]: no match anywhere). Shapes are kept apart per alternative, so
    [view(bmm(..)) ‖ matmul(x, y)] does not let a [view] of anything through.
    It is the least solution of
      kids(x) = [(any, [])], kids(f(p0..pn)) = [({f}, [root(p0); …; root(pn)])],
      kids(F(p0..pn)) = [(any, [root(p0); …])], kids(p ‖ p') = kids(p) ++ kids(p'),
      kids(p ; g) = kids(∃F.p) = kids(p), kids(∃x.p) = kids(p) with x's
      positions forgotten, kids(p ; (p' ≈ x)) = kids(p) with an
      unconstrained position holding the variable x narrowed to root(p'),
      kids(P(..)) = index(P)
    ([root] the root index), computed by Kleene iteration from [[]]
    everywhere, checked to be a post-fixpoint (every shape of a body within
    a shape of its definition's entry), else the empty index (every lookup
    unconstrained), as the root index is.

    [kid_index_sound]: a definition whose index has no shape of a node's
    operator and arguments has no declarative match there. The driver asks
    it, with the root index, before calling the matcher at a node
    ([pypm_candidates_at], [Entry.candidates_at]). *)

From Coq Require Import ZArith List Bool Arith Lia.
From PyPM Require Import Syntax Subst Declarative RootIndex.
Import ListNotations.

(** A shape: the operators a matching node can have and, position by
    position, the operators its arguments can have (positions past the
    list unconstrained). A [kset] is a list of shapes, one of which a
    matching node has; [[]]: no match at all. *)
Definition shape := (rootset * list rootset)%type.
Definition kset := list shape.

(** [a ⊆ b], position by position ([b] may constrain fewer positions). *)
Fixpoint kl_le (a b : list rootset) : bool :=
  match a, b with
  | _, [] => true
  | x :: a', y :: b' => rs_le x y && kl_le a' b'
  | [], _ :: _ => false
  end.

Definition shape_le (a b : shape) : bool := rs_le (fst a) (fst b) && kl_le (snd a) (snd b).

(** Every shape of [a] is within one of [b]. *)
Definition k_le (a b : kset) : bool := forallb (fun s => existsb (shape_le s) b) a.

(** Whether the operators [fs] of the arguments (each with its attributes)
    are admitted, position by position. *)
Fixpoint kl_mem (l : list rootset) (fs : list (symbol * (attribute -> option Z))) : bool :=
  match l, fs with
  | r :: l', (f, sa) :: fs' => rs_mem sa f r && kl_mem l' fs'
  | _, _ => true
  end.

(** Whether a node of operator [f] (attributes [sa]) with arguments of
    operators [fs] has one of the shapes of [k]. *)
Definition k_mem (k : kset) (f : symbol) (sa : attribute -> option Z)
    (fs : list (symbol * (attribute -> option Z))) : bool :=
  existsb (fun s => rs_mem sa f (fst s) && kl_mem (snd s) fs) k.

(** A node's arguments as [k_mem] reads them: operator and its attributes. *)
Definition kid_syms (G : graph) (t : node) : list (symbol * (attribute -> option Z)) :=
  map (fun c => (label G c, sym_attrs G (label G c))) (children G t).

(** An index: definition number -> its kset (one unconstrained shape when
    absent). *)
Definition kindex := VarMap.t kset.

Definition ki_find (K : kindex) (P : pname) : kset :=
  match VarMap.find P K with Some k => k | None => [(RAny, [])] end.

(** While [kids_of] computes, an argument position also says whether its
    pattern is a variable ([Some x]): a constraint [p ; (p' ≈ x)] then
    narrows an unconstrained position holding [x] to the root of [p']. *)
Definition slot := (rootset * option var)%type.
Definition vshape := (rootset * list slot)%type.

Definition var_of (p : pattern) : option var := match p with PVar x => Some x | _ => None end.

Definition slot_of (R : rindex) (p : pattern) : slot := (root_of R p, var_of p).

(** [∃x.p]: the positions holding [x] hold another [x] than the one outside. *)
Definition forget (x : var) (s : vshape) : vshape :=
  (fst s, map (fun sl => match snd sl with
                         | Some y => if Nat.eqb x y then (fst sl, None) else sl
                         | None => sl
                         end) (snd s)).

Definition narrow (x : var) (r' : rootset) (s : vshape) : vshape :=
  (fst s, map (fun sl => match sl with
                         | (RAny, Some y) => if Nat.eqb x y then (r', Some y) else sl
                         | _ => sl
                         end) (snd s)).

Definition unvar (s : shape) : vshape := (fst s, map (fun r => (r, None)) (snd s)).
Definition strip (s : vshape) : shape := (fst s, map fst (snd s)).

(** The shapes of [p]'s matches, reading roots in [R] and calls in [K]. *)
Fixpoint kids_of (R : rindex) (K : kindex) (p : pattern) : list vshape :=
  match p with
  | PVar _ => [(RAny, [])]
  | PApp f ps => [(RSyms [f] [], map (slot_of R) ps)]
  | PFunVar _ ps => [(RAny, map (slot_of R) ps)]
  | PAlt p1 p2 => kids_of R K p1 ++ kids_of R K p2
  | PGuard p _ | PExistsF _ p => kids_of R K p
  | PExists x p => map (forget x) (kids_of R K p)
  | PConstr p p' x => map (narrow x (root_of R p')) (kids_of R K p)
  | PCall P _ _ => map unvar (ki_find K P)
  end.

Definition kbody (R : rindex) (K : kindex) (d : pdef) : kset := map strip (kids_of R K (body d)).

Definition kindex_step (D : list pdef) (R : rindex) (K : kindex) : kindex :=
  tabulate (kbody R K) D 0 (VarMap.empty kset).

Definition kindex_bottom (D : list pdef) : kindex :=
  tabulate (fun _ => []) D 0 (VarMap.empty kset).

(** [K] is a post-fixpoint for the definitions [D] numbered from [i]. *)
Fixpoint kpost_from (D : list pdef) (R : rindex) (K : kindex) (i : nat) : bool :=
  match D with
  | [] => true
  | d :: D' => k_le (kbody R K d) (ki_find K i) && kpost_from D' R K (S i)
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

Lemma kl_mem_le : forall a b fs, kl_le a b = true -> kl_mem a fs = true -> kl_mem b fs = true.
Proof.
  induction a as [|x a IH]; intros [|y b] fs Hle H; simpl in *; auto; try discriminate.
  destruct fs as [|[f sa] fs]; auto. apply andb_true_iff in Hle. destruct Hle as [L1 L2].
  apply andb_true_iff in H. destruct H as [H1 H2].
  rewrite (rs_mem_le sa f x y L1 H1). simpl. eauto.
Qed.

Lemma k_mem_le : forall a b f sa fs, k_le a b = true -> k_mem a f sa fs = true ->
  k_mem b f sa fs = true.
Proof.
  intros a b f sa fs Hle H. unfold k_mem in *. apply existsb_exists in H.
  destruct H as [s [Hs Hm]]. unfold k_le in Hle. rewrite forallb_forall in Hle.
  specialize (Hle s Hs). apply existsb_exists in Hle. destruct Hle as [s' [Hs' Hl]].
  apply existsb_exists. exists s'. split; [exact Hs'|].
  unfold shape_le in Hl. apply andb_true_iff in Hl. destruct Hl as [L1 L2].
  apply andb_true_iff in Hm. destruct Hm as [M1 M2].
  rewrite (rs_mem_le sa f _ _ L1 M1). simpl. eapply kl_mem_le; eauto.
Qed.

Lemma kpost_from_nth : forall D R K i j d,
  kpost_from D R K i = true -> nth_error D j = Some d ->
  k_le (kbody R K d) (ki_find K (i + j)) = true.
Proof.
  induction D as [|d0 D IH]; intros R K i j d H Hn; [destruct j; discriminate|].
  simpl in H. apply andb_true_iff in H. destruct H as [H1 H2].
  destruct j as [|j]; simpl in Hn.
  - inversion Hn; subst. rewrite Nat.add_0_r. exact H1.
  - replace (i + S j) with (S i + j) by lia. eauto.
Qed.

Lemma kl_le_nil : forall a, kl_le a [] = true.
Proof. destruct a; reflexivity. Qed.

Lemma kpost_from_empty : forall D R i, kpost_from D R (VarMap.empty kset) i = true.
Proof.
  induction D as [|d D IH]; intros R i; simpl; auto.
  rewrite IH, andb_true_r. unfold ki_find. rewrite VarMapF.empty_o.
  unfold k_le. apply forallb_forall. intros s _. simpl.
  unfold shape_le. rewrite kl_le_nil. destruct (fst s); reflexivity.
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

  (** The positions of a shape hold for arguments [cs] under [σ]: each
      argument's operator is admitted, and a position holding a variable
      holds what [σ] binds it to. *)
  Fixpoint slots_ok (σ : tsubst) (l : list slot) (cs : list node) : Prop :=
    match l, cs with
    | sl :: l', c :: cs' =>
        admits G c (fst sl) = true /\ (forall x, snd sl = Some x -> σ x = Some c) /\
        slots_ok σ l' cs'
    | _, _ => True
    end.

  Definition vshape_ok (σ : tsubst) (t : node) (s : vshape) : Prop :=
    admits G t (fst s) = true /\ slots_ok σ (snd s) (children G t).

  Lemma slots_list_ok : forall R, post_from D R 0 = true ->
    forall σ ψ ps cs, matches_list G D σ ψ ps cs -> slots_ok σ (map (slot_of R) ps) cs.
  Proof.
    intros R HR σ ψ ps. induction ps as [|p ps IH]; intros cs H; [destruct cs; exact I|].
    inversion H; subst. simpl. split; [|split].
    - match goal with Hp : matches _ _ _ _ p _ |- _ =>
        exact (root_of_sound G D R HR _ _ _ _ Hp) end.
    - intros x Hx. destruct p; simpl in Hx; try discriminate. inversion Hx; subst.
      match goal with Hp : matches _ _ _ _ (PVar _) _ |- _ => inversion Hp; subst; assumption end.
    - eauto.
  Qed.

  Lemma slots_forget : forall σ x v l cs,
    slots_ok (upd σ x v) l cs ->
    slots_ok σ (map (fun sl => match snd sl with
                              | Some y => if Nat.eqb x y then (fst sl, None) else sl
                              | None => sl
                              end) l) cs.
  Proof.
    intros σ x v l. induction l as [|[r o] l IH]; intros [|c cs] H; simpl in *; auto.
    destruct H as [H1 [H2 H3]].
    destruct o as [y|]; [destruct (Nat.eqb x y) eqn:E|]; simpl; (split; [exact H1|]);
      (split; [|eauto]); intros z Hz; try discriminate.
    all: inversion Hz; subst; specialize (H2 _ eq_refl); unfold upd in H2;
      rewrite E in H2; exact H2.
  Qed.

  Lemma slots_narrow : forall R σ ψ x t' p' l cs,
    post_from D R 0 = true -> σ x = Some t' -> matches G D σ ψ p' t' ->
    slots_ok σ l cs ->
    slots_ok σ (map (fun sl => match sl with
                              | (RAny, Some y) => if Nat.eqb x y then (root_of R p', Some y) else sl
                              | _ => sl
                              end) l) cs.
  Proof.
    intros R σ ψ x t' p' l cs HR Hx Hp'. revert cs.
    induction l as [|[r o] l IH]; intros [|c cs] H; simpl in *; auto.
    destruct H as [H1 [H2 H3]].
    destruct r as [|l0 c0]; [destruct o as [y|]; [destruct (Nat.eqb x y) eqn:E|]|];
      simpl; repeat split; auto.
    apply Nat.eqb_eq in E. subst y. rewrite (H2 x eq_refl) in Hx. inversion Hx; subst.
    exact (root_of_sound G D R HR _ _ _ _ Hp').
  Qed.

  Lemma slots_unvar : forall σ σ' l l' cs,
    slots_ok σ' l cs -> kl_le (map fst l) l' = true ->
    slots_ok σ (map (fun r => (r, None)) l') cs.
  Proof.
    intros σ σ' l. induction l as [|[r o] l IH]; intros l' cs H Hle.
    - destruct l'; [destruct cs; exact I | discriminate].
    - destruct l' as [|r' l']; [destruct cs; exact I|]. destruct cs as [|c cs]; [exact I|].
      simpl in *. destruct H as [H1 [_ H3]]. apply andb_true_iff in Hle.
      destruct Hle as [L1 L2]. split; [|split].
      + unfold admits in *. eapply rs_mem_le; eauto.
      + intros z Hz; discriminate.
      + eauto.
  Qed.

  Lemma slots_kl_mem : forall σ l cs, slots_ok σ l cs ->
    kl_mem (map fst l) (map (fun c => (label G c, sym_attrs G (label G c))) cs) = true.
  Proof.
    intros σ l. induction l as [|[r o] l IH]; intros [|c cs] H; simpl in *; auto.
    destruct H as [H1 [_ H3]]. unfold admits in H1. rewrite H1. simpl. eauto.
  Qed.

  (** A match's root and arguments have one of the shapes [kids_of R K p],
      for post-fixpoints [R] (roots) and [K] (shapes). *)
  Lemma kids_of_sound : forall R K, post_from D R 0 = true -> kpost_from D R K 0 = true ->
    forall σ ψ p t, matches G D σ ψ p t -> exists s, In s (kids_of R K p) /\ vshape_ok σ t s.
  Proof.
    intros R K HR HK σ ψ p t H.
    induction H using matches_mut with
      (P0 := fun _ _ _ _ _ => True); simpl; auto.
    - (* P_Var *) exists (RAny, []). split; [left; reflexivity|]. split; [reflexivity|].
      destruct (children G t); exact I.
    - (* P_Fun *) eexists. split; [left; reflexivity|]. split.
      + unfold admits. subst f. simpl. rewrite Nat.eqb_refl. reflexivity.
      + eapply slots_list_ok; eauto.
    - destruct IHmatches as [s [Hs Ho]]. exists s. split; [apply in_or_app; auto | exact Ho].
    - destruct IHmatches as [s [Hs Ho]]. exists s. split; [apply in_or_app; auto | exact Ho].
    - (* P_Exists *) destruct IHmatches as [s [Hs [Ho1 Ho2]]]. exists (forget x s).
      split; [apply in_map; exact Hs|]. split; [exact Ho1|]. eapply slots_forget; eauto.
    - (* P_MatchConstr *) destruct IHmatches1 as [s [Hs [Ho1 Ho2]]].
      exists (narrow x (root_of R p') s). split; [apply in_map; exact Hs|].
      split; [exact Ho1|]. eapply slots_narrow; eauto.
    - (* P_FunVar *) eexists. split; [left; reflexivity|]. split; [reflexivity|].
      eapply slots_list_ok; eauto.
    - (* P_Mu *) destruct IHmatches as [s [Hs [Ho1 Ho2]]].
      pose proof (kpost_from_nth D R K 0 P d HK e) as Hle. simpl in Hle.
      unfold k_le in Hle. rewrite forallb_forall in Hle.
      assert (Hin : In (strip s) (kbody R K d)) by (apply in_map; exact Hs).
      specialize (Hle _ Hin). apply existsb_exists in Hle. destruct Hle as [s' [Hs' Hl]].
      exists (unvar s'). split; [apply in_map; exact Hs'|].
      unfold shape_le in Hl. apply andb_true_iff in Hl. destruct Hl as [L1 L2].
      split.
      + unfold admits in *. eapply rs_mem_le; eauto.
      + eapply slots_unvar; eauto.
  Qed.

  (** The index is sound: a definition whose index rejects a node's
      operator and arguments has no match there, whatever the
      substitutions. *)
  Theorem kid_index_sound : forall P d σ ψ t,
    nth_error D P = Some d -> matches G D σ ψ (body d) t ->
    k_mem (ki_find (kid_index D (root_index D)) P) (label G t) (sym_attrs G (label G t))
          (kid_syms G t) = true.
  Proof.
    intros P d σ ψ t Hd Hm.
    destruct (kids_of_sound _ _ (root_index_post D) (kid_index_post D _) _ _ _ _ Hm)
      as [s [Hs [Ho1 Ho2]]].
    eapply k_mem_le; [apply (kpost_from_nth D _ _ 0 P d (kid_index_post D _) Hd)|].
    unfold k_mem. apply existsb_exists. exists (strip s). split; [apply in_map; exact Hs|].
    unfold admits in Ho1. simpl. rewrite Ho1. simpl. unfold kid_syms.
    eapply slots_kl_mem; eauto.
  Qed.
End Sound.
